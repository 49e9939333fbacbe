package bot

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// Tabular tool results (a JSON array of flat objects, or a Markdown table
// in a result's text) are shown to the person as a table block in the
// thread, or, past what one table block holds, as a CSV file uploaded
// there; never as a wall of JSON or of pipes.

// Slack's table block: at most 100 rows (the header row included), 20
// cells a row and 10 000 characters of cells.
const (
	tableMaxRows  = 100
	tableMaxCols  = 20
	tableMaxChars = 10000
)

var _ agent.TableSharer = threadFiles{}

// ShareTable posts t in the thread and returns the model's line.
func (s threadFiles) ShareTable(ctx context.Context, t agent.ToolTable) string {
	what := "this result"
	switch {
	case t.N > 0:
		what = fmt.Sprintf("table %d of this result", t.N)
	case t.Markdown:
		what = "the table in this result"
	}
	what += fmt.Sprintf(" (%d rows × %d columns)", len(t.Rows), len(t.Columns))
	if fitsTableBlock(t) {
		if err := s.postTable(ctx, t); err != nil {
			s.b.log.Warn("bot: tool table not posted", "team", s.k.Team, "thread", s.k.ThreadTS, "tool", t.Tool, "err", err)
			return ""
		}
		return "[" + what + " is shown to the person as a table in the thread: do not repeat it as a table]"
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(t.Columns)
	_ = w.WriteAll(t.Rows) // flushes; a bytes.Buffer does not fail
	name := toolFileName(t.Tool)
	if t.N > 1 {
		name += fmt.Sprintf("-%d", t.N)
	}
	note := s.ShareFile(ctx, agent.ToolFile{Tool: t.Tool, Name: name + ".csv", MimeType: "text/csv", Data: buf.Bytes(), Size: int64(buf.Len())})
	return "[" + what + " is too large for a table in Slack] " + note
}

// fitsTableBlock reports whether t fits one table block.
func fitsTableBlock(t agent.ToolTable) bool {
	if len(t.Rows)+1 > tableMaxRows || len(t.Columns) > tableMaxCols {
		return false
	}
	n := 0
	for _, c := range t.Columns {
		n += utf8.RuneCountInString(c)
	}
	for _, r := range t.Rows {
		for _, c := range r {
			n += utf8.RuneCountInString(c)
		}
	}
	return n <= tableMaxChars
}

// postTable posts t as a table block, its header row first.
func (s threadFiles) postTable(ctx context.Context, t agent.ToolTable) error {
	tb := slack.NewTableBlock("")
	cells := func(vals []string) []slack.TableCell {
		out := make([]slack.TableCell, len(vals))
		for i, v := range vals {
			out[i] = slack.NewTableRawTextCell(cmp.Or(v, " "))
		}
		return out
	}
	tb.AddRow(cells(t.Columns)...)
	for _, r := range t.Rows {
		tb.AddRow(cells(r)...)
	}
	if slices.ContainsFunc(t.Align, func(a string) bool { return a != "" }) {
		// A Markdown table's alignment (its delimiter row's colons).
		for _, a := range t.Align {
			tb.ColumnSettings = append(tb.ColumnSettings, slack.ColumnSetting{Align: slack.ColumnAlignment(cmp.Or(a, "left"))})
		}
	}
	k := s.k
	text := fmt.Sprintf("Result of %s: %d rows", mrkdwn.EscapeText(t.Tool), len(t.Rows))
	return s.b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.ChatPostMessage, Channel: k.Channel}, func(ctx context.Context, api *slack.Client) error {
		_, _, err := api.PostMessageContext(ctx, k.Channel, slack.MsgOptionTS(k.ThreadTS), slack.MsgOptionText(text, false),
			slack.MsgOptionBlocks(tb))
		return err
	})
}

// toolFileName is a tool name as a file name.
func toolFileName(tool string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, tool)
}
