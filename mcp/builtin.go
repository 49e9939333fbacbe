package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Built-in servers run inside the bot's process, connected over an
// in-memory transport: no child process, no network, nothing to install.
// A config entry names one with `builtin: <kind>`. The only kind is
// BuiltinDemo, a small notes store that lets a fresh playground (or any
// deployment that wants it) show a tool approval and a real tool result.

// BuiltinDemo is the demo notes server: list_notes (read-only) and
// add_note (writes a note). Notes live in memory, per workspace, until
// the process exits.
const BuiltinDemo = "demo"

// builtinKinds are the kinds a config may name.
var builtinKinds = []string{BuiltinDemo}

func validBuiltin(kind string) bool {
	for _, k := range builtinKinds {
		if k == kind {
			return true
		}
	}
	return false
}

const transportBuiltin = "builtin"

// Limits of the demo notes store.
const (
	maxDemoNotes    = 100
	maxDemoNoteRune = 500
)

// newBuiltinServer builds the server of kind; each mount has its own (so
// its own notes).
func newBuiltinServer(kind string) (*mcp.Server, error) {
	if kind != BuiltinDemo {
		return nil, fmt.Errorf("unknown built-in server %q", kind)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "bobbin-demo-notes", Title: "Bobbin demo notes", Version: "1.0.0"},
		&mcp.ServerOptions{Instructions: "A small notes store built into Bobbin, for trying tools out. Notes are kept in memory until the bot restarts."})
	var (
		mu    sync.Mutex
		notes []demoNote
	)
	f := false
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Title: "List notes",
		Description: "List the notes saved with add_note, oldest first.",
		Annotations: &mcp.ToolAnnotations{Title: "List notes", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(notes) == 0 {
				return textContent("No notes yet. Save one with add_note."), nil, nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d note(s):\n", len(notes))
			for i, n := range notes {
				fmt.Fprintf(&b, "%d. %s (saved %s)\n", i+1, n.text, n.at.UTC().Format("15:04:05 UTC"))
			}
			return textContent(strings.TrimRight(b.String(), "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Title: "Add a note",
		Description: "Save a short note (at most 500 characters) in the demo notes store.",
		Annotations: &mcp.ToolAnnotations{Title: "Add a note", DestructiveHint: &f, IdempotentHint: false, OpenWorldHint: &f}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text" jsonschema:"the note to save"`
		}) (*mcp.CallToolResult, any, error) {
			text := strings.TrimSpace(in.Text)
			if text == "" {
				return nil, nil, errors.New("the note is empty: pass its text in \"text\"")
			}
			if utf8.RuneCountInString(text) > maxDemoNoteRune {
				text = string([]rune(text)[:maxDemoNoteRune]) + "…"
			}
			mu.Lock()
			defer mu.Unlock()
			if len(notes) >= maxDemoNotes {
				return nil, nil, fmt.Errorf("the demo store is full (%d notes)", maxDemoNotes)
			}
			notes = append(notes, demoNote{text: text, at: time.Now()})
			return textContent(fmt.Sprintf("Saved note %d: %s\nThe store now holds %d note(s).", len(notes), text, len(notes))), nil, nil
		})
	return s, nil
}

type demoNote struct {
	text string
	at   time.Time
}

func textContent(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// dialBuiltin connects to the mount's in-process server over an
// in-memory transport pair.
func dialBuiltin(ctx context.Context, p *dialParams) (*conn, error) {
	if p.builtin == nil {
		return nil, fmt.Errorf("unknown built-in server %q", p.cfg.Builtin)
	}
	attempt := func(opts *mcp.ClientSessionOptions) (*conn, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := p.builtin.Connect(context.WithoutCancel(ctx), st, nil)
		if err != nil {
			return nil, err
		}
		cs, cancel, err := boundedConnect(ctx, p.client(), ct, opts, p.probeTimeout)
		if err != nil {
			_ = ss.Close()
			return nil, err
		}
		stop := func() {
			cancel()
			_ = ss.Close()
		}
		return &conn{cs: cs, era: cs.InitializeResult().ProtocolVersion, transport: transportBuiltin,
			cancel: stop, closing: make(chan struct{}), dead: make(chan struct{})}, nil
	}
	c, err := attempt(nil)
	if err == nil || !hungUp(err) || ctx.Err() != nil {
		return c, err
	}
	return attempt(legacyOnly)
}
