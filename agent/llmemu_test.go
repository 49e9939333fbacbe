package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"sync/atomic"
	"testing"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/anthropic"
	"github.com/bobbinbot/bobbin/provider/openai"
)

// loader serves files by id and counts loads.
type loader struct {
	files map[string][]byte
	loads atomic.Int32
}

func (l *loader) LoadFile(_ context.Context, ref provider.FileRef) ([]byte, error) {
	l.loads.Add(1)
	return l.files[ref.ID], nil
}

func testImage(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 300, 200))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func ref(id, name, mime string, data []byte) provider.FileRef {
	s := sha256.Sum256(data)
	r := provider.FileRef{ID: id, Name: name, MimeType: mime, Size: int64(len(data)), SHA256: hex.EncodeToString(s[:])}
	if _, w, h, err := provider.SniffImage(data); err == nil {
		r.Width, r.Height = w, h
	}
	return r
}

// clients are the two real protocol clients against one emulator.
func clients(emu *llmemu.Server) map[string]struct {
	p     provider.Provider
	model string
} {
	co := provider.ClientOptions{APIKey: "sk-test"}
	oa, an := co, co
	oa.BaseURL, an.BaseURL = emu.URL()+"/v1", emu.URL()
	return map[string]struct {
		p     provider.Provider
		model string
	}{
		"openai":    {openai.New(openai.Options{ClientOptions: oa}), "gpt-4o"},
		"anthropic": {anthropic.New(anthropic.Options{ClientOptions: an}), "claude-sonnet-4-5"},
	}
}

// storedHistory round-trips msgs through JSON, as the session store does.
func storedHistory(t *testing.T, msgs []provider.Message) []provider.Message {
	t.Helper()
	out := make([]provider.Message, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFilesEndToEnd, for both protocols: a stored image and PDF reference
// reach the emulator as the exact bytes; an endpoint refusing images gets
// one retry with notes and the turn is answered.
func TestFilesEndToEnd(t *testing.T) {
	img := testImage(t)
	pdf := []byte("%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n")
	files := map[string][]byte{"F1": img, "F2": pdf}
	emu := llmemu.New(llmemu.Options{})
	t.Cleanup(emu.Close)
	for name, c := range clients(emu) {
		t.Run(name, func(t *testing.T) {
			h := storedHistory(t, []provider.Message{{Role: provider.RoleUser, UserName: "Ann", Content: "what does this error mean?", Parts: []provider.Part{
				{Type: provider.PartImage, File: &provider.FileRef{}}, // placeholder, replaced below
				{Type: provider.PartDocument, File: &provider.FileRef{}},
			}}})
			r1, r2 := ref("F1", "shot.png", provider.MimePNG, img), ref("F2", "spec.pdf", provider.MimePDF, pdf)
			h[0].Parts[0].File, h[0].Parts[1].File = &r1, &r2
			l := &loader{files: files}
			a := agent.New(c.p, agent.Options{Model: c.model})
			emu.SetReject(llmemu.Rejects{})
			before := len(emu.Requests())
			res, err := a.Run(t.Context(), agent.Turn{History: h, Files: l})
			if err != nil || res.Outcome != agent.EndTurn {
				t.Fatalf("turn: %v %v", res.Outcome, err)
			}
			rec := emu.Requests()[before]
			media := rec.Media()
			if len(media) != 2 || !bytes.Equal(media[0].Data, img) || media[0].MimeType != "image/png" || !bytes.Equal(media[1].Data, pdf) {
				t.Fatalf("media = %d items", len(media))
			}

			// The same thread on an endpoint without vision.
			emu.SetReject(llmemu.Rejects{Images: true, Documents: true})
			before = len(emu.Requests())
			res, err = a.Run(t.Context(), agent.Turn{History: append(storedHistory(t, res.Messages), provider.Message{Role: provider.RoleUser, Content: "and?"}), Files: l})
			if err != nil || res.Outcome != agent.EndTurn || res.Text == "" {
				t.Fatalf("turn on a text-only endpoint: %v %v %q", res.Outcome, err, res.Text)
			}
			reqs := emu.Requests()[before:]
			if len(reqs) != 2 || reqs[0].Status != 400 || reqs[1].Status != 200 || len(reqs[1].Media()) != 0 {
				t.Fatalf("requests: %d (want a refused one and a retry without media)", len(reqs))
			}
			if got := reqs[1].Messages[0].Text; !bytes.Contains([]byte(got), []byte("[image shot.png (image/png, ")) {
				t.Errorf("retry's first message lacks the image note: %q", got)
			}
			if n := l.loads.Load(); n != 2 {
				t.Errorf("%d loads, want 2 (each file once, then cached)", n)
			}
		})
	}
}

// TestCompactionFollowsTokenSettings: the summary request goes through the
// same client with the turn's output cap, so it gets the token parameter
// the endpoint takes (the real "unsupported parameter" refusal is retried
// once) and no cap at all when MaxTokens is 0.
func TestCompactionFollowsTokenSettings(t *testing.T) {
	long := make([]provider.Message, 0, 40)
	for i := range 20 {
		long = append(long, provider.Message{Role: provider.RoleUser, Content: "question " + string(rune('a'+i)) + " " + string(bytes.Repeat([]byte("lorem ipsum "), 40))},
			provider.Message{Role: provider.RoleAssistant, Content: "answer " + string(bytes.Repeat([]byte("dolor sit "), 40))})
	}
	long = append(long, provider.Message{Role: provider.RoleUser, Content: "and now?"})
	tests := []struct {
		name      string
		model     string
		maxTokens int
		sent      []string // token parameter per request: summary (+ retry), answer
	}{
		{"reasoning family, no cap", "o3-mini", 0, []string{"", ""}},
		{"reasoning family, cap", "o3-mini", 500, []string{"max_completion_tokens", "max_completion_tokens"}},
		{"unknown reasoner learns", "my-reasoner", 500, []string{"max_tokens", "max_completion_tokens", "max_completion_tokens"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu := llmemu.New(llmemu.Options{Reject: llmemu.Rejects{MaxTokens: true}})
			t.Cleanup(emu.Close)
			p := openai.New(openai.Options{ClientOptions: provider.ClientOptions{BaseURL: emu.URL() + "/v1"}})
			a := agent.New(p, agent.Options{Model: tc.model, MaxTokens: tc.maxTokens, ContextWindow: 4096, KeepRecent: 2})
			res, err := a.Run(t.Context(), agent.Turn{History: long})
			if err != nil || !res.Compacted || res.Outcome != agent.EndTurn {
				t.Fatalf("compacted=%v outcome=%v err=%v", res.Compacted, res.Outcome, err)
			}
			var sent []string
			for _, r := range emu.Requests() {
				k := ""
				for _, name := range []string{"max_tokens", "max_completion_tokens"} {
					if _, ok := r.JSON[name]; ok {
						k = name
					}
				}
				sent = append(sent, k)
			}
			if len(sent) != len(tc.sent) {
				t.Fatalf("token parameters per request = %q, want %q", sent, tc.sent)
			}
			for i := range sent {
				if sent[i] != tc.sent[i] {
					t.Errorf("token parameters per request = %q, want %q", sent, tc.sent)
					break
				}
			}
		})
	}
}

// failingTool fails every call with err.
type failingTool struct{ err error }

func (failingTool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "fail", Description: "Always fails", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (f failingTool) Call(context.Context, json.RawMessage) (string, error) { return "", f.err }

// TestToolErrorReachesOpenAIOnce: a failing tool's result reaches an
// OpenAI-compatible model as "Error: <what failed>", the prefix once (the
// agent words the failure, the provider only marks unworded ones).
func TestToolErrorReachesOpenAIOnce(t *testing.T) {
	emu := llmemu.New(llmemu.Options{})
	t.Cleanup(emu.Close)
	emu.SetResponder(func(r llmemu.Recorded) llmemu.Reply {
		if r.LastMessage().Role == "tool" {
			return llmemu.Reply{Text: "noted"}
		}
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: "fail", Arguments: "{}"}}}
	})
	p := openai.New(openai.Options{ClientOptions: provider.ClientOptions{BaseURL: emu.URL() + "/v1"}})
	a := agent.New(p, agent.Options{Model: "gpt-4o"})
	res, err := a.Run(t.Context(), agent.Turn{History: []provider.Message{{Role: provider.RoleUser, Content: "go"}},
		Tools: []agent.Tool{failingTool{errors.New("upstream said 503")}}, Grants: []string{"fail"}})
	if err != nil || res.Outcome != agent.EndTurn {
		t.Fatalf("outcome=%v err=%v", res.Outcome, err)
	}
	reqs := emu.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if got, want := reqs[1].LastMessage().Text, "Error: upstream said 503"; got != want {
		t.Errorf("tool result the model saw = %q, want %q", got, want)
	}
}
