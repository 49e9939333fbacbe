// Package anthropic is the streaming client for the Anthropic Messages API
// (POST {BaseURL}/v1/messages with stream:true). It turns a provider.Request
// into the Messages wire shape (top-level system, merged roles, tool results
// in one user message right after the tool_use, thinking blocks passed back
// unmodified) and decodes the SSE stream into normalized provider.Events.
// Images and PDFs become base64 image and document blocks before a user
// message's text (text files and notes after it, as text blocks); a tool's
// images go inside its tool_result. A refusal of them is an APIError
// matching provider.ErrMediaUnsupported.
//
// anthropic may import provider and provider/internal; it must never import
// agent, bot, session, mcp, slack-go, go-redis or the MCP SDK.
package anthropic
