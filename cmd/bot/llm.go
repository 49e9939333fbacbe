package main

import (
	"log/slog"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/anthropic"
	"github.com/bobbinbot/bobbin/provider/openai"
)

// newProvider builds the model client the configuration names. The
// LLM_OPENAI_TOKEN_PARAM, LLM_STREAM_USAGE and LLM_MID_SYSTEM settings
// concern the OpenAI-compatible protocol only: the Messages API always
// takes max_tokens, always reports usage, and has no mid-conversation
// system role (a summary there is always user text). Compaction's summary
// requests go through the same client, so they follow the same settings.
func newProvider(cfg config, log *slog.Logger) provider.Provider {
	co := provider.ClientOptions{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Logger: log}
	if cfg.LLMProvider == "anthropic" {
		return anthropic.New(anthropic.Options{ClientOptions: co, DefaultMaxTokens: cfg.LLMMaxTokens})
	}
	usage := cfg.LLMStreamUsage
	return openai.New(openai.Options{
		ClientOptions:         co,
		TokenParam:            cfg.LLMOpenAITokenParam,
		IncludeUsage:          &usage,
		MidConversationSystem: cfg.LLMMidSystem,
	})
}

// llmOptionProblem checks the model-endpoint settings that env parsing
// cannot; "" when they are fine.
func (c config) llmOptionProblem() string {
	switch c.LLMOpenAITokenParam {
	case openai.TokenParamAuto, openai.TokenParamMaxTokens, openai.TokenParamMaxCompletionTokens:
		return ""
	}
	return "LLM_OPENAI_TOKEN_PARAM must be auto, max_tokens or max_completion_tokens"
}
