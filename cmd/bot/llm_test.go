package main

import (
	"strings"
	"testing"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/provider"
)

// TestLLMOptionsConfig: defaults, and a bad LLM_OPENAI_TOKEN_PARAM is
// named without its value.
func TestLLMOptionsConfig(t *testing.T) {
	c, err := loadConfig(envFunc(goodEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if c.LLMOpenAITokenParam != "auto" || !c.LLMStreamUsage || c.LLMMidSystem || !c.LLMImages {
		t.Errorf("defaults: token param %q, stream usage %v, mid system %v, images %v", c.LLMOpenAITokenParam, c.LLMStreamUsage, c.LLMMidSystem, c.LLMImages)
	}
	e := goodEnv()
	e["LLM_OPENAI_TOKEN_PARAM"] = "max_tokenz"
	_, err = loadConfig(envFunc(e))
	if err == nil || !strings.Contains(err.Error(), "LLM_OPENAI_TOKEN_PARAM must be auto, max_tokens or max_completion_tokens") || strings.Contains(err.Error(), "max_tokenz") {
		t.Errorf("err = %v", err)
	}
}

// TestLLMOptionsWiring drives the configured client against the fake model
// server answering the real error texts.
func TestLLMOptionsWiring(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		rj     llmemu.Rejects
		model  string
		fails  bool
		checks func(t *testing.T, reqs []llmemu.Recorded)
	}{
		{name: "auto retries max_tokens refused", model: "gpt-4o", rj: llmemu.Rejects{MaxTokens: true},
			checks: func(t *testing.T, reqs []llmemu.Recorded) {
				if len(reqs) != 2 || reqs[1].JSON["max_completion_tokens"] == nil || reqs[1].JSON["max_tokens"] != nil {
					t.Errorf("requests: %d, last body %s", len(reqs), reqs[len(reqs)-1].Body)
				}
			}},
		{name: "explicit max_tokens is not retried", model: "gpt-4o", env: map[string]string{"LLM_OPENAI_TOKEN_PARAM": "max_tokens"},
			rj: llmemu.Rejects{MaxTokens: true}, fails: true},
		{name: "stream usage off", model: "gpt-4o", env: map[string]string{"LLM_STREAM_USAGE": "false"}, rj: llmemu.Rejects{StreamOptions: true},
			checks: func(t *testing.T, reqs []llmemu.Recorded) {
				if len(reqs) != 1 || reqs[0].JSON["stream_options"] != nil {
					t.Errorf("requests: %d, body %s", len(reqs), reqs[0].Body)
				}
			}},
		{name: "mid-conversation system kept", model: "gpt-4o", env: map[string]string{"LLM_MID_SYSTEM": "true"},
			checks: func(t *testing.T, reqs []llmemu.Recorded) {
				if roles := roles(reqs[0]); roles != "system user system user" {
					t.Errorf("roles = %s", roles)
				}
			}},
		{name: "mid-conversation system as user by default", model: "gpt-4o",
			checks: func(t *testing.T, reqs []llmemu.Recorded) {
				if roles := roles(reqs[0]); roles != "system user user user" {
					t.Errorf("roles = %s", roles)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			llm := llmemu.New(llmemu.Options{Reject: tc.rj})
			defer llm.Close()
			e := goodEnv()
			e["LLM_BASE_URL"] = llm.URL() + "/v1"
			e["LLM_MODEL"] = tc.model
			for k, v := range tc.env {
				e[k] = v
			}
			cfg, err := loadConfig(envFunc(e))
			if err != nil {
				t.Fatal(err)
			}
			p := newProvider(cfg, nil)
			req := provider.Request{Model: tc.model, MaxTokens: cfg.LLMMaxTokens, Messages: []provider.Message{
				{Role: provider.RoleSystem, Content: "Be brief."}, {Role: provider.RoleUser, Content: "a"},
				{Role: provider.RoleSystem, Content: "summary", Summary: true}, {Role: provider.RoleUser, Content: "b"}}}
			var streamErr error
			for _, err := range p.Stream(t.Context(), req) {
				streamErr = err
			}
			if (streamErr != nil) != tc.fails {
				t.Fatalf("stream error = %v, want failure %v", streamErr, tc.fails)
			}
			if tc.checks != nil {
				tc.checks(t, llm.Requests())
			}
		})
	}
}

func roles(r llmemu.Recorded) string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Role)
	}
	return strings.Join(out, " ")
}
