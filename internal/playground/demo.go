package playground

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The demo model: an OpenAI-compatible Chat Completions endpoint (the
// streaming subset Bobbin's openai provider uses) that answers from a
// short script, so the playground shows a whole turn — a streamed
// answer, a tool call with its approval, the tool's result — with no
// model configured. It says plainly what it is in every answer. cmd/bot
// mounts it only for the playground subcommand, on a loopback port, with
// a key made for the run.

// DemoModelName is the model name the demo answers to.
const DemoModelName = "bobbin-demo"

// Demo is the demo model's HTTP handler (POST /v1/chat/completions, GET
// /v1/models).
type Demo struct {
	key  string
	step time.Duration
}

// NewDemo builds the demo model. key is the API key it requires (Bearer);
// step is the pause between streamed words (0: 30 to 80 ms, varying, the
// pace of a hosted model's tokens).
func NewDemo(key string, step time.Duration) *Demo {
	return &Demo{key: key, step: step}
}

// pauseFor is the wait before the next streamed word.
func (d *Demo) pauseFor() time.Duration {
	if d.step > 0 {
		return d.step
	}
	return 30*time.Millisecond + rand.N(50*time.Millisecond)
}

type demoRequest struct {
	Model    string        `json:"model"`
	Messages []demoMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type demoMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text returns a message's text and how many images or files it carries.
func (m demoMessage) text() (string, int) {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, 0
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	media := 0
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		} else {
			media++
		}
	}
	return b.String(), media
}

func (d *Demo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if d.key != "" && subtle.ConstantTimeCompare([]byte(got), []byte(d.key)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"message": "invalid API key", "type": "invalid_request_error"}})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]string{"id": DemoModelName, "object": "model", "owned_by": "bobbin"}}})
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"message": "not found", "type": "invalid_request_error"}})
		return
	}
	var req demoRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"message": "malformed request: " + err.Error(), "type": "invalid_request_error"}})
		return
	}
	answer, call := d.script(req)
	d.stream(w, r, req, answer, call)
}

// demoCall is the tool call the script makes.
type demoCall struct {
	Name string
	Args string
}

// script decides the answer: after a tool result, report it; to a
// person, explain and (when there are tools and this is the thread's
// first question, or they ask for a tool) call one.
func (d *Demo) script(req demoRequest) (string, *demoCall) {
	if len(req.Messages) == 0 {
		return "This is Bobbin's demo model. I got an empty conversation.", nil
	}
	last := req.Messages[len(req.Messages)-1]
	var tools []string
	schemas := map[string]json.RawMessage{}
	for _, t := range req.Tools {
		tools = append(tools, t.Function.Name)
		schemas[t.Function.Name] = t.Function.Parameters
	}
	if last.Role == "tool" {
		result, _ := last.text()
		name := "the tool"
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				if c.ID == last.ToolCallID {
					name = "`" + peopleToolName(c.Function.Name) + "`"
				}
			}
		}
		return fmt.Sprintf("%s answered:\n\n```\n%s\n```\n\nThat was a real MCP tool call, run after your approval. "+
			"I am only the demo model: a real model would now use that answer. "+
			"Say *notes* to see what is saved, or set `LLM_PROVIDER`, `LLM_BASE_URL` and `LLM_MODEL` to try a real model.", name, clip(result, 800)), nil
	}
	question, media := last.text()
	// The bot prefixes a person's words with who said them and where.
	question = speakerRE.ReplaceAllString(question, "")
	var b strings.Builder
	b.WriteString("Hello! I am Bobbin's **demo model**, a script, not a language model. ")
	if media > 0 {
		fmt.Fprintf(&b, "Your message carried %d image(s) or file(s); a real model with vision would read them. ", media)
	}
	first := !slices.ContainsFunc(req.Messages[:len(req.Messages)-1], func(m demoMessage) bool { return m.Role == "assistant" })
	lower := strings.ToLower(question)
	wantsTool := first || strings.Contains(lower, "tool") || strings.Contains(lower, "memory") || strings.Contains(lower, "note")
	if !first && strings.Contains(lower, "note") && slices.Contains(tools, demoList) {
		b.WriteString("Here is the list of saved notes, from the `demo/list_notes` tool: ")
		b.WriteString("it only reads, yet it asks first, as every tool of a server the operator has not marked trusted does.")
		return b.String(), &demoCall{Name: demoList, Args: "{}"}
	}
	if tool := pickTool(tools); tool != "" && wantsTool {
		server, name, _ := strings.Cut(tool, "__")
		args := demoArgs(schemas[tool])
		if tool == demoAdd {
			q := strings.TrimSpace(question)
			if q == "" {
				q = "hello from the playground"
			}
			a, _ := json.Marshal(map[string]string{"text": clip(q, 200)})
			args = string(a)
			b.WriteString("To show a tool approval, I ask to save your words with `demo/add_note`: ")
		} else {
			fmt.Fprintf(&b, "To show a tool approval, I ask to run `%s/%s`: ", server, name)
		}
		b.WriteString("press **Allow once** (only you or an admin may).")
		return b.String(), &demoCall{Name: tool, Args: args}
	}
	if q := strings.TrimSpace(question); q != "" {
		fmt.Fprintf(&b, "You wrote: “%s”. ", clip(q, 200))
	}
	if len(tools) == 0 {
		b.WriteString("No tool is offered to me here, so I cannot show an approval. The playground mounts its demo notes server " +
			"unless `MCP_CONFIG` names a file; add it to yours with:\n\n" +
			"```\nservers:\n  - name: demo\n    builtin: demo\n```\n\n")
	} else {
		b.WriteString("Say *tool* to see a tool approval again. ")
	}
	b.WriteString("To talk to a real model, set `LLM_PROVIDER`, `LLM_BASE_URL` and `LLM_MODEL` (for example a local Ollama at `http://localhost:11434/v1`).")
	return b.String(), nil
}

// The built-in demo server's tools as the playground mounts it.
const (
	demoAdd  = "demo__add_note"
	demoList = "demo__list_notes"
)

// peopleToolName shows server__tool as people see it: server/tool.
func peopleToolName(exposed string) string {
	if server, tool, ok := strings.Cut(exposed, "__"); ok {
		return server + "/" + tool
	}
	return exposed
}

// speakerRE matches the bracketed notes the bot puts before a person's
// words ("[alice (U…)] ", "[Slack: while writing this, …]").
var speakerRE = regexp.MustCompile(`^(\[[^\]\n]{1,300}\]\s*)+`)

// pickTool prefers the memory server's read_graph, then any memory tool,
// then the demo server's add_note, then any tool.
func pickTool(tools []string) string {
	if len(tools) == 0 {
		return ""
	}
	sorted := slices.Sorted(slices.Values(tools))
	for _, want := range []func(string) bool{
		func(t string) bool { return t == "memory__read_graph" },
		func(t string) bool { return strings.HasPrefix(t, "memory__") },
		func(t string) bool { return t == demoAdd },
	} {
		if i := slices.IndexFunc(sorted, want); i >= 0 {
			return sorted[i]
		}
	}
	return sorted[0]
}

// demoArgs fills a tool's required arguments with placeholder values of
// the right JSON type.
func demoArgs(schema json.RawMessage) string {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		typ, _ := s.Properties[name].Type.(string)
		switch typ {
		case "number", "integer":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			args[name] = "demo"
		}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// stream writes the answer as OpenAI's streamed chunks: the text in
// pieces, then the tool call (its arguments in two pieces), the finish
// reason, usage when asked for, and [DONE].
func (d *Demo) stream(w http.ResponseWriter, r *http.Request, req demoRequest, answer string, call *demoCall) {
	id := fmt.Sprintf("chatcmpl-demo%d", time.Now().UnixNano())
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": DemoModelName,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	finish := "stop"
	if call != nil {
		finish = "tool_calls"
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": answer}
		if call != nil {
			msg["tool_calls"] = []any{map[string]any{"id": "call_demo1", "type": "function", "function": map[string]any{"name": call.Name, "arguments": call.Args}}}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": DemoModelName,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": demoUsage(req, answer)})
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	pause := func() bool {
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(d.pauseFor()):
			return true
		}
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	for _, piece := range pieces(answer, 1) {
		if !pause() || !send(chunk(map[string]any{"content": piece}, nil)) {
			return
		}
	}
	if call != nil {
		half := len(call.Args) / 2
		tc := func(v map[string]any) map[string]any {
			v["index"] = 0
			return chunk(map[string]any{"tool_calls": []any{v}}, nil)
		}
		if !send(tc(map[string]any{"id": "call_demo1", "type": "function", "function": map[string]any{"name": call.Name, "arguments": ""}})) ||
			!send(tc(map[string]any{"function": map[string]any{"arguments": call.Args[:half]}})) ||
			!send(tc(map[string]any{"function": map[string]any{"arguments": call.Args[half:]}})) {
			return
		}
	}
	if !send(chunk(map[string]any{}, finish)) {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		if !send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": DemoModelName,
			"choices": []any{}, "usage": demoUsage(req, answer)}) {
			return
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// demoUsage estimates tokens at four bytes each.
func demoUsage(req demoRequest, answer string) map[string]int {
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content) / 4
	}
	out := len(answer)/4 + 1
	return map[string]int{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
}

// pieces splits s into runs of n words (keeping the spaces), as a model
// streams tokens.
func pieces(s string, n int) []string {
	var out []string
	words := 0
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\n' {
			words++
			if words == n {
				out = append(out, s[start:i+1])
				start, words = i+1, 0
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
