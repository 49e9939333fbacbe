// Package llmemu is a fake model server for tests: one loopback HTTP server that
// speaks both the OpenAI-compatible Chat Completions protocol
// (POST /v1/chat/completions) and the Anthropic Messages protocol
// (POST /v1/messages), serving scripted turns as realistic server-sent event
// streams and recording every request.
//
// The streams are shaped after recordings of the real services: OpenAI
// chunks with id/object/created/model/choices, tool-call fragments keyed by
// index, the include_usage chunk with choices:[] and data: [DONE]; Anthropic
// event:/data: pairs from message_start to message_stop with ping, text,
// thinking and tool_use blocks (input_json_delta fragments) and usage. Text
// is cut into token-sized deltas sent at a configurable pace.
//
// Requests may carry images and documents (OpenAI image_url and file
// parts, Anthropic image and document blocks); they are decoded into
// Recorded.Media and counted by the providers' size formulas. Options.Reject
// (or SetReject) makes the server refuse max_tokens, max_completion_tokens,
// stream_options, images or documents with the real services' 400 texts.
//
// What each request gets is decided, in this order, by: the API key check
// (401), request validation (400), refused features (400), the context
// window (400), faults armed
// with FailNext, the FIFO queue filled by Enqueue, the responder function,
// and finally DefaultReply, which answers AnswerFor(last user text) so that
// concurrent conversations each get a distinct, predictable answer.
//
// Fault controls: Reply.Error (an HTTP error, or a mid-stream error event
// after Reply.CutAfter deltas), Reply.Truncate and Reply.Abort (the body ends
// without its terminal marker, or the connection is reset), Reply.Delay before
// the first byte, FailNext, Hold (park streams mid-way until released),
// SetTokenInterval, InFlight and the Wait* helpers.
//
// The package is imported only from tests (E2E tests of the bot, cmd/bot
// fault tests, provider client tests). It imports nothing of ours: never bot,
// session, agent, mcp or cmd, nor slack-go, go-redis or the MCP SDK.
package llmemu
