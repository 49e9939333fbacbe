package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// filesMCP is a loopback MCP server whose tools return files: export (a
// 300 KB CSV embedded resource and a PNG image), report (a link to a PDF
// resource on the same server) and dump (a blob larger than the limit the
// test sets).
func filesMCP(t *testing.T, csv, pngData, pdf, big []byte) string {
	t.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "exports", Version: "1.0.0"}, nil)
	no := false
	ro := &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}
	type in struct{}
	add := func(name string, content ...mcpsdk.Content) {
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: name, Description: "Exports " + name, Annotations: ro},
			func(context.Context, *mcpsdk.CallToolRequest, in) (*mcpsdk.CallToolResult, any, error) {
				return &mcpsdk.CallToolResult{Content: content}, nil, nil
			})
	}
	add("export", &mcpsdk.TextContent{Text: "Exported 5000 customers."},
		&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///exports/customers.csv", MIMEType: "text/csv", Text: string(csv)}},
		&mcpsdk.ImageContent{Data: pngData, MIMEType: "image/png"})
	size := int64(len(pdf))
	add("report", &mcpsdk.ResourceLink{URI: "reports://q3", Name: "q3-report.pdf", MIMEType: "application/pdf", Size: &size})
	add("rows12", &mcpsdk.TextContent{Text: jsonRows(12)})
	add("rows2000", &mcpsdk.TextContent{Text: jsonRows(2000)})
	add("md12", &mcpsdk.TextContent{Text: "Open orders:\n\n" + mdRows(12) + "\n\n12 orders in all."})
	add("md300", &mcpsdk.TextContent{Text: mdRows(300)})
	add("dump", &mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///dump.bin", MIMEType: "application/octet-stream", Blob: big}})
	srv.AddResource(&mcpsdk.Resource{URI: "reports://q3", Name: "q3-report.pdf", MIMEType: "application/pdf"},
		func(context.Context, *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
			return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{{URI: "reports://q3", MIMEType: "application/pdf", Blob: pdf}}}, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv },
		&mcpsdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// jsonRows is a JSON array of n flat objects.
func jsonRows(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"Customer %d","active":%t,"note":null}`, i, i, i%2 == 0)
	}
	b.WriteString("]")
	return b.String()
}

// mdRows is a Markdown table of n orders (an escaped pipe in each item,
// the amount right-aligned), as a model-facing tool might write one.
func mdRows(n int) string {
	var b strings.Builder
	b.WriteString("| Order | Item | Amount |\n|---|:--|--:|\n")
	for i := range n {
		fmt.Fprintf(&b, "| %d | Tea \\| cake %d | `%d.50` |\n", i, i, i)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TestToolFilesUploadedIntoThread runs the whole program against the
// Slack emulator (default rate limits), real Redis, the model emulator and
// an MCP server returning files: a 300 KB CSV resource and a PNG become two
// files in the thread (exact bytes, names, types; one upload URL each), a
// linked resource is read from the server and uploaded, the model is told
// what was shared and never gets the bytes, a file over
// TOOL_FILE_MAX_BYTES becomes a note to the person and the model, JSON
// rows and a Markdown table become table blocks (or CSV files past a
// table's limits), and Slack answers no call with 429. It runs with each
// provider (the OpenAI and the Anthropic protocol of the model emulator).
func TestToolFilesUploadedIntoThread(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) { testToolFiles(t, provider) })
	}
}

func testToolFiles(t *testing.T, provider string) {
	// A workspace of its own: what the bot keeps in Redis per workspace
	// (the Slack rate budgets above all) is this run's, not the other
	// provider's or another test's.
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	team := "T" + strings.ToUpper(hex.EncodeToString(rnd[:]))
	teams := slackemu.DefaultTeams()
	teams[0].ID = team
	emu := slackemu.New(slackemu.Options{Teams: teams})
	defer emu.Close()

	var csv bytes.Buffer
	csv.WriteString("id,name,email\n")
	for i := 0; csv.Len() < 300<<10; i++ {
		fmt.Fprintf(&csv, "%d,Customer %d,customer%d@example.com\n", i, i, i)
	}
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		img.Set(x, x%30, color.RGBA{R: 200, A: 255})
	}
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		t.Fatal(err)
	}
	pdf := []byte("%PDF-1.4\n% a tiny report\n%%EOF\n")
	big := bytes.Repeat([]byte{0xAB}, 600<<10)
	srvName := fmt.Sprintf("exports%d", time.Now().UnixNano()%1e9)
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	cfg := fmt.Sprintf("servers:\n  - name: %s\n    url: %s\n    trusted: true\n", srvName, filesMCP(t, csv.Bytes(), pngBuf.Bytes(), pdf, big))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	llm := llmemu.New(llmemu.Options{TokenInterval: time.Millisecond})
	defer llm.Close()
	// The answer after a tool is short and ends with a mark ask waits for,
	// so every turn is over when the test stops the bot: an echo of
	// rows2000's 32 KB result streamed for seconds, was cut by the stop and
	// handed over, and the next test's bot on the same Redis resumed it.
	llm.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if last := r.LastMessage(); last.Role == "tool" {
			said := []rune(last.Text)
			return llmemu.Reply{Text: "Tools said: " + string(said[:min(40, len(said))]) + " (end)"}
		}
		text := r.LastUserText()
		if i := strings.Index(text, "call "); i >= 0 {
			return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: strings.TrimSpace(text[i+len("call "):]), Arguments: `{}`}}}
		}
		return llmemu.Reply{Text: "A plain answer."}
	})

	_, wait, stop := startMCPRun(t, emu, mcpEnv(t, emu, llm, cfgPath, providerEnv(llm, provider, map[string]string{"TOOL_FILE_MAX_BYTES": "512000"})))
	defer stop()

	// ask runs one tool in a DM (a trusted server's read-only tool runs
	// without a prompt there) and returns the thread and the tool result
	// the model got.
	ask := func(tool string) (thread, result string) {
		t.Helper()
		p, err := emu.Post(slackemu.UserPost{Team: team, Channel: slackemu.DMAlice, User: slackemu.UserAlice,
			Text: "call " + srvName + "__" + tool})
		if err != nil {
			t.Fatal(err)
		}
		wait("the answer to "+tool, func() bool {
			for _, m := range emu.BotReplies(slackemu.DMAlice, p.TS) {
				if strings.Contains(m.Text, "Tools said:") && strings.Contains(m.Text, "(end)") {
					return true
				}
			}
			return false
		})
		for _, r := range llm.Requests() {
			if last := r.LastMessage(); last.Role == "tool" && strings.Contains(r.LastUserText(), srvName+"__"+tool) {
				result = last.Text
			}
		}
		return p.TS, result
	}
	files := func(thread string) []slackemu.File {
		var out []slackemu.File
		for _, m := range emu.BotReplies(slackemu.DMAlice, thread) {
			for _, id := range m.Files {
				f, ok := emu.FileInfo(id)
				if !ok {
					t.Fatalf("file %s of message %s is not stored", id, m.TS)
				}
				out = append(out, f)
			}
		}
		return out
	}

	// export: the CSV and the PNG, as the server named and typed them.
	th, result := ask("export")
	got := files(th)
	want := []struct {
		name, mimetype string
		data           []byte
	}{
		{"customers.csv", "text/csv", csv.Bytes()},
		{"export-1.png", "image/png", pngBuf.Bytes()},
	}
	if len(got) != len(want) {
		t.Fatalf("the thread has %d files, want %d", len(got), len(want))
	}
	for i, w := range want {
		f := got[i]
		if f.Name != w.name || f.Mimetype != w.mimetype || !bytes.Equal(f.Content, w.data) {
			t.Errorf("file %d: %s (%s, %d bytes); want %s (%s, %d bytes, the exact bytes)", i, f.Name, f.Mimetype, len(f.Content), w.name, w.mimetype, len(w.data))
		}
	}
	if n := len(emu.Calls("files.getUploadURLExternal")); n != 2 {
		t.Errorf("%d upload URLs asked for two files", n)
	}
	if !strings.Contains(result, "Exported 5000 customers.") || !strings.Contains(result, "customers.csv (text/csv, 300 KB) was shared in this thread") ||
		!strings.Contains(result, "export-1.png (image/png,") || strings.Contains(result, "Customer 17,") {
		t.Errorf("the model's tool result: %.600q", result)
	}

	// report: a resource link, read from the same server.
	th, result = ask("report")
	if got := files(th); len(got) != 1 || got[0].Name != "q3-report.pdf" || !bytes.Equal(got[0].Content, pdf) {
		t.Errorf("report's files: %+v; want q3-report.pdf with the resource's bytes", got)
	}
	if !strings.Contains(result, "q3-report.pdf (application/pdf, ") {
		t.Errorf("the model's tool result for report: %q", result)
	}

	// dump: over TOOL_FILE_MAX_BYTES, a note for both, nothing uploaded.
	before := len(emu.Calls("files.getUploadURLExternal"))
	th, result = ask("dump")
	if got := files(th); len(got) != 0 {
		t.Errorf("the oversized file was uploaded: %+v", got)
	}
	if n := len(emu.Calls("files.getUploadURLExternal")); n != before {
		t.Errorf("the oversized file asked for an upload URL")
	}
	if !strings.Contains(result, "dump.bin") || !strings.Contains(result, "was not shared: it is larger than the 500 KB limit") {
		t.Errorf("the model's tool result for dump: %q", result)
	}
	noted := false
	for _, m := range emu.BotReplies(slackemu.DMAlice, th) {
		noted = noted || strings.Contains(m.Text, "dump.bin") && strings.Contains(m.Text, "was not shared")
	}
	if !noted {
		t.Errorf("the person was not told the file was too large")
	}
	// A 12-row JSON result: a table block in the thread, header first.
	th, result = ask("rows12")
	var table []byte
	for _, m := range emu.BotReplies(slackemu.DMAlice, th) {
		if bytes.Contains(m.Blocks, []byte(`"type":"table"`)) {
			table = m.Blocks
		}
	}
	if table == nil || !bytes.Contains(table, []byte(`{"type":"raw_text","text":"active"}`)) || !bytes.Contains(table, []byte(`"text":"Customer 11"`)) {
		t.Errorf("no table of the 12 rows in the thread; blocks: %s", table)
	}
	if !strings.Contains(result, "(12 rows × 4 columns) is shown to the person as a table") {
		t.Errorf("the model's tool result for rows12: %.300q", result)
	}
	// A 2,000-row one: a CSV file.
	th, result = ask("rows2000")
	if got := files(th); len(got) != 1 || got[0].Name != srvName+"__rows2000.csv" || got[0].Mimetype != "text/csv" ||
		!bytes.HasPrefix(got[0].Content, []byte("id,name,active,note\n0,Customer 0,true,\n")) || bytes.Count(got[0].Content, []byte("\n")) != 2001 {
		t.Errorf("rows2000's files: %d; want one CSV of 2,001 lines", len(got))
	}
	if !strings.Contains(result, "(2000 rows × 4 columns) is too large for a table") {
		t.Errorf("the model's tool result for rows2000: %.300q", result)
	}
	// A Markdown table with text around it: a table block, aligned as
	// its delimiter row says, cells as plain text; the model still gets
	// the text.
	th, result = ask("md12")
	table = nil
	for _, m := range emu.BotReplies(slackemu.DMAlice, th) {
		if bytes.Contains(m.Blocks, []byte(`"type":"table"`)) {
			table = m.Blocks
		}
	}
	for _, want := range []string{`{"type":"raw_text","text":"Amount"}`, `"text":"Tea | cake 11"`, `"text":"11.50"`,
		`"column_settings":[{"align":"left","is_wrapped":false},{"align":"left","is_wrapped":false},{"align":"right","is_wrapped":false}]`} {
		if !bytes.Contains(table, []byte(want)) {
			t.Errorf("the table of md12 lacks %s; blocks: %s", want, table)
		}
	}
	if !strings.Contains(result, "[the table in this result (12 rows × 3 columns) is shown to the person as a table") ||
		!strings.Contains(result, "Open orders:") || !strings.Contains(result, "12 orders in all.") {
		t.Errorf("the model's tool result for md12: %.400q", result)
	}
	// 300 rows: a CSV file.
	th, result = ask("md300")
	if got := files(th); len(got) != 1 || got[0].Name != srvName+"__md300.csv" ||
		!bytes.HasPrefix(got[0].Content, []byte("Order,Item,Amount\n0,Tea | cake 0,0.50\n")) || bytes.Count(got[0].Content, []byte("\n")) != 301 {
		t.Errorf("md300's files: %d; want one CSV of 301 lines", len(got))
	}
	if !strings.Contains(result, "(300 rows × 3 columns) is too large for a table") {
		t.Errorf("the model's tool result for md300: %.300q", result)
	}

	if rl := emu.RateLimited(); len(rl) != 0 {
		t.Errorf("Slack rate-limited calls: %v", rl)
	}
	for _, r := range llm.Requests() {
		if r.Protocol != llmemu.Protocol(provider) {
			t.Fatalf("a model request spoke %s, want %s", r.Protocol, provider)
		}
	}
}

// providerEnv adds to extra the model settings of provider (openai or
// anthropic) against llm, for mcpEnv.
func providerEnv(llm *llmemu.Server, provider string, extra map[string]string) map[string]string {
	if provider == "anthropic" {
		extra["LLM_PROVIDER"], extra["LLM_BASE_URL"], extra["LLM_MODEL"] = "anthropic", llm.URL(), "claude-sonnet-4-5"
	}
	return extra
}
