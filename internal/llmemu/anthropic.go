package llmemu

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Anthropic event shapes, field order as in recorded streams.
type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anMessageStart struct {
	Type    string `json:"type"`
	Message struct {
		ID           string   `json:"id"`
		Type         string   `json:"type"`
		Role         string   `json:"role"`
		Model        string   `json:"model"`
		Content      []string `json:"content"`
		StopReason   *string  `json:"stop_reason"`
		StopSequence *string  `json:"stop_sequence"`
		Usage        anUsage  `json:"usage"`
	} `json:"message"`
}

type anContentBlock struct {
	Type      string           `json:"type"`
	Text      *string          `json:"text,omitempty"`
	Thinking  *string          `json:"thinking,omitempty"`
	Signature *string          `json:"signature,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     *json.RawMessage `json:"input,omitempty"`
}

type anBlockStart struct {
	Type         string         `json:"type"`
	Index        int            `json:"index"`
	ContentBlock anContentBlock `json:"content_block"`
}

type anDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type anBlockDelta struct {
	Type  string  `json:"type"`
	Index int     `json:"index"`
	Delta anDelta `json:"delta"`
}

type anBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type anMessageDelta struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage anUsage `json:"usage"`
}

// anthropicPads is the cycle of trailing spaces after each event's JSON:
// the real API pads its data lines, and clients must cope.
var anthropicPads = [...]int{0, 6, 3, 0, 11, 2, 8, 0, 15}

// anthropicToolID is the generated id of tool call i of request seq.
func anthropicToolID(seq, i int) string { return fmt.Sprintf("toolu_llmemu%06dx%02d", seq, i) }

// thinkingSignature is the deterministic stand-in for a thinking block's
// signature.
func thinkingSignature(thinking string) string {
	sum := sha256.Sum256([]byte("llmemu:" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func anthropicWireUsage(u Usage, output int) anUsage {
	return anUsage{
		InputTokens:              max(0, u.InputTokens-u.CachedTokens-u.CacheWriteTokens),
		CacheCreationInputTokens: u.CacheWriteTokens,
		CacheReadInputTokens:     u.CachedTokens,
		OutputTokens:             output,
	}
}

// streamAnthropic writes a Messages stream: message_start, ping, one
// content block per thinking/text/tool_use part with its deltas,
// message_delta with stop reason and usage, message_stop.
func (s *Server) streamAnthropic(ctx context.Context, st *streamer, rec *Recorded, r Reply) {
	st.start("Request-Id", fmt.Sprintf("req_llmemu%06d", rec.Seq))
	send := func(event string, v any) bool {
		b, _ := json.Marshal(v)
		return st.send(event, b, anthropicPads[st.events%len(anthropicPads)])
	}

	steps, cutByMax := limitSteps(plan(r, ""), rec.MaxTokens)
	u := usageFor(r, rec, len(steps))

	var ms anMessageStart
	ms.Type = "message_start"
	ms.Message.ID = fmt.Sprintf("msg_llmemu%06d", rec.Seq)
	ms.Message.Type, ms.Message.Role, ms.Message.Model = "message", "assistant", rec.Model
	ms.Message.Content = []string{}
	ms.Message.Usage = anthropicWireUsage(u, 1)
	if !send("message_start", ms) {
		return
	}

	block, kind := -1, stepKind(0)
	closeBlock := func() bool {
		if block < 0 {
			return true
		}
		if kind == stepReasoning {
			sig := thinkingSignature(r.Reasoning)
			if !send("content_block_delta", anBlockDelta{Type: "content_block_delta", Index: block, Delta: anDelta{Type: "signature_delta", Signature: &sig}}) {
				return false
			}
		}
		return send("content_block_stop", anBlockStop{Type: "content_block_stop", Index: block})
	}
	openBlock := func(sp step) bool {
		if !closeBlock() {
			return false
		}
		block++
		kind = sp.kind
		empty := ""
		var cb anContentBlock
		switch sp.kind {
		case stepReasoning:
			cb = anContentBlock{Type: "thinking", Thinking: &empty, Signature: &empty}
		case stepText:
			cb = anContentBlock{Type: "text", Text: &empty}
		default:
			tc := r.ToolCalls[sp.tool]
			in := json.RawMessage("{}")
			cb = anContentBlock{Type: "tool_use", ID: cmp.Or(tc.ID, anthropicToolID(rec.Seq, sp.tool)), Name: tc.Name, Input: &in}
		}
		if !send("content_block_start", anBlockStart{Type: "content_block_start", Index: block, ContentBlock: cb}) {
			return false
		}
		if block == 0 {
			return st.send("ping", []byte(`{"type": "ping"}`), 0)
		}
		return true
	}

	if len(steps) == 0 && !st.send("ping", []byte(`{"type": "ping"}`), 0) {
		return
	}
	cut := cutIndex(r)
	errData := anthropicStreamError(r.Error)
	for i, sp := range steps {
		if i == cut {
			st.cut(r, "error", errData, 0)
			return
		}
		if !st.pace(ctx) {
			return
		}
		if block < 0 || sp.kind == stepToolStart || (sp.kind != kind && sp.kind != stepToolArgs) {
			if !openBlock(sp) {
				return
			}
		}
		var d anDelta
		switch sp.kind {
		case stepReasoning:
			d = anDelta{Type: "thinking_delta", Thinking: &sp.text}
		case stepText:
			d = anDelta{Type: "text_delta", Text: &sp.text}
		default: // a tool's first fragment is "", as in recordings
			d = anDelta{Type: "input_json_delta", PartialJSON: &sp.text}
		}
		if !send("content_block_delta", anBlockDelta{Type: "content_block_delta", Index: block, Delta: d}) {
			return
		}
		st.sent++
	}
	if cut >= 0 {
		st.cut(r, "error", errData, 0)
		return
	}
	if !closeBlock() {
		return
	}

	var md anMessageDelta
	md.Type = "message_delta"
	switch {
	case r.Stop != "":
		md.Delta.StopReason = r.Stop
	case cutByMax:
		md.Delta.StopReason = "max_tokens"
	case len(r.ToolCalls) > 0:
		md.Delta.StopReason = "tool_use"
	default:
		md.Delta.StopReason = "end_turn"
	}
	md.Usage = anthropicWireUsage(u, u.OutputTokens)
	if !send("message_delta", md) {
		return
	}
	send("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})
}
