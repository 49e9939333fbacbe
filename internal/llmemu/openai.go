package llmemu

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// OpenAI chunk shapes, field order as in recorded gpt-4o streams.
type oaChunk struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Choices           []oaChoice `json:"choices"`
	Usage             *oaUsage   `json:"usage,omitempty"`
}

type oaChoice struct {
	Index        int       `json:"index"`
	Delta        oaDelta   `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"` // always null
	FinishReason *string   `json:"finish_reason"`
}

type oaDelta struct {
	Role string `json:"role,omitempty"`
	// Content is raw so it can be null (tool-call and reasoning chunks) or
	// absent.
	Content          json.RawMessage `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []oaToolDelta   `json:"tool_calls,omitempty"`
}

type oaToolDelta struct {
	Index    int             `json:"index"`
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function oaFunctionDelta `json:"function"`
}

type oaFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

var jsonNull = json.RawMessage("null")

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// openAICallID is the generated id of tool call i of request seq.
func openAICallID(seq, i int) string { return fmt.Sprintf("call_llmemu%06dx%02d", seq, i) }

// streamOpenAI writes a Chat Completions stream: a role chunk, one chunk
// per delta, the finish chunk, the include_usage chunk (only when the
// request asked for it, as OpenAI does) and data: [DONE].
func (s *Server) streamOpenAI(ctx context.Context, st *streamer, rec *Recorded, r Reply) {
	id := fmt.Sprintf("chatcmpl-llmemu%06d", rec.Seq)
	st.start("X-Request-Id", fmt.Sprintf("req_llmemu%06d", rec.Seq))
	created := time.Now().Unix()
	chunk := func(d oaDelta, finish *string) []byte {
		b, _ := json.Marshal(oaChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: rec.Model,
			SystemFingerprint: "fp_llmemu",
			Choices:           []oaChoice{{Delta: d, FinishReason: finish}},
		})
		return b
	}

	steps, cutByMax := limitSteps(plan(r, "{}"), rec.MaxTokens)
	first := oaDelta{Role: "assistant", Content: jsonString("")}
	if r.Text == "" && (r.Reasoning != "" || len(r.ToolCalls) > 0) {
		first.Content = jsonNull
	}
	if !st.send("", chunk(first, nil), 0) {
		return
	}
	cut := cutIndex(r)
	reasoningTokens := 0
	for i, sp := range steps {
		if i == cut {
			st.cut(r, "", openAIStreamError(r.Error), 0)
			return
		}
		if !st.pace(ctx) {
			return
		}
		var d oaDelta
		switch sp.kind {
		case stepReasoning:
			reasoningTokens++
			d = oaDelta{Content: jsonNull, ReasoningContent: &sp.text}
		case stepText:
			d = oaDelta{Content: jsonString(sp.text)}
		case stepToolStart:
			tc := r.ToolCalls[sp.tool]
			d = oaDelta{ToolCalls: []oaToolDelta{{
				Index: sp.tool, ID: cmp.Or(tc.ID, openAICallID(rec.Seq, sp.tool)), Type: "function",
				Function: oaFunctionDelta{Name: tc.Name},
			}}}
		case stepToolArgs:
			d = oaDelta{ToolCalls: []oaToolDelta{{Index: sp.tool, Function: oaFunctionDelta{Arguments: sp.text}}}}
		}
		if !st.send("", chunk(d, nil), 0) {
			return
		}
		st.sent++
	}
	if cut >= 0 {
		st.cut(r, "", openAIStreamError(r.Error), 0)
		return
	}

	finish := "stop"
	switch {
	case r.Stop != "":
		finish = r.Stop
	case cutByMax:
		finish = "length"
	case len(r.ToolCalls) > 0:
		finish = "tool_calls"
	}
	if !st.send("", chunk(oaDelta{}, &finish), 0) {
		return
	}
	if rec.IncludeUsage {
		u := usageFor(r, rec, len(steps))
		var ou oaUsage
		ou.PromptTokens, ou.CompletionTokens = u.InputTokens, u.OutputTokens
		ou.TotalTokens = u.InputTokens + u.OutputTokens
		ou.PromptTokensDetails.CachedTokens = u.CachedTokens
		ou.CompletionTokensDetails.ReasoningTokens = reasoningTokens
		b, _ := json.Marshal(oaChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: rec.Model,
			SystemFingerprint: "fp_llmemu", Choices: []oaChoice{}, Usage: &ou,
		})
		if !st.send("", b, 0) {
			return
		}
	}
	st.send("", []byte("[DONE]"), 0)
}
