package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent"
)

// Tabular results: a result whose text (or, without text, structured
// content) is a JSON array of flat objects, or whose text holds Markdown
// tables (mdtable.go), is shown to the person as tables by a sharer that
// can (agent.TableSharer); the model still gets the text, plus the
// sharer's line for each table.

// maxTableCells bounds the cells read from one result.
const maxTableCells = 1 << 20

// resultTables are res's tables: the JSON rows it is (all text, or
// structured content alone), or else the Markdown tables in its text
// blocks; none when it has neither.
func resultTables(tool string, res *mcp.CallToolResult) []agent.ToolTable {
	var text []byte
	onlyText := true
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			onlyText = false
			continue
		}
		text = append(text, t.Text...)
	}
	if onlyText {
		if len(text) == 0 && res.StructuredContent != nil {
			text, _ = json.Marshal(res.StructuredContent)
		}
		if t, ok := parseTable(tool, text); ok {
			return []agent.ToolTable{t}
		}
	}
	var out []agent.ToolTable
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, markdownTables(tool, t.Text)...)
		}
	}
	if len(out) > maxMarkdownTables {
		out = out[:maxMarkdownTables]
	}
	for i := range out {
		out[i].N = 0
		if len(out) > 1 {
			out[i].N = i + 1
		}
	}
	return out
}

// parseTable reads a JSON array of objects whose values are all scalars,
// keeping the keys' order of appearance.
func parseTable(tool string, data []byte) (agent.ToolTable, bool) {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '[' {
		return agent.ToolTable{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	t := agent.ToolTable{Tool: tool}
	col := map[string]int{}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return agent.ToolTable{}, false
	}
	cells := 0
	for dec.More() {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return agent.ToolTable{}, false
		}
		row := make([]string, len(t.Columns))
		for dec.More() {
			k, err := dec.Token()
			key, _ := k.(string)
			if err != nil {
				return agent.ToolTable{}, false
			}
			v, err := dec.Token()
			if err != nil {
				return agent.ToolTable{}, false
			}
			var s string
			switch x := v.(type) {
			case string:
				s = x
			case json.Number:
				s = x.String()
			case bool:
				s = strconv.FormatBool(x)
			case nil:
			default: // a nested object or array: not flat
				return agent.ToolTable{}, false
			}
			i, ok := col[key]
			if !ok {
				i = len(t.Columns)
				col[key] = i
				t.Columns = append(t.Columns, key)
				for j := range t.Rows {
					t.Rows[j] = append(t.Rows[j], "")
				}
			}
			for len(row) <= i {
				row = append(row, "")
			}
			row[i] = s
			if cells++; cells > maxTableCells {
				return agent.ToolTable{}, false
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return agent.ToolTable{}, false
		}
		t.Rows = append(t.Rows, row)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return agent.ToolTable{}, false
	}
	if _, err := dec.Token(); err != io.EOF || len(t.Rows) == 0 || len(t.Columns) == 0 {
		return agent.ToolTable{}, false
	}
	for i := range t.Rows {
		for len(t.Rows[i]) < len(t.Columns) {
			t.Rows[i] = append(t.Rows[i], "")
		}
	}
	return t, true
}
