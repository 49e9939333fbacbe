// Package provider is the normalized vocabulary every model client speaks:
// messages, tool specs and calls, reasoning blocks, stream events, stop
// reasons, usage and the errors callers branch on, plus the Provider
// interface that provider/openai and provider/anthropic implement.
//
// Nothing above this package knows which wire protocol is in use: system
// placement, tool-result shape, argument encoding and reasoning pass-back are
// the implementations' problem.
//
// provider must not import any other package of this module, slack-go,
// go-redis or the MCP SDK.
package provider
