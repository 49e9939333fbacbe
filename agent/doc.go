// Package agent runs the model/tool loop of one turn: it builds requests,
// streams from a provider.Provider, reports progress to an Observer, asks an
// Approver before tools run, runs approved tools in parallel with timeouts and
// output caps, checkpoints every step, keeps the prompt within a token budget
// by compacting, and resumes from any transcript.
//
// # Permission policy
//
// Every tool call goes through the same deterministic order, and the model
// never decides: an unknown tool name becomes an error result; arguments are
// validated against the tool's input schema (an error result names the
// problem, so nobody is asked to approve a malformed call); a disabled or
// configuration-denied tool is refused; a tool allowed by configuration, a
// read-only tool of a trusted server, or a tool granted for the session runs;
// anything else is put to the Approver, one call at a time. An approver
// error or timeout counts as Deny. A refused call becomes a tool result
// telling the model that the person declined.
//
// # Cache-friendly requests
//
// Tools are sorted by name, the system prompt is used as given, and history
// is only appended to, so each request begins with the previous one byte for
// byte and providers' prompt caches hit. Compaction is the only planned
// prefix break.
//
// # Files
//
// User messages may carry content parts (provider.Part): images, PDFs,
// inlined text files and notes. Transcripts keep images and PDFs as
// references; for each request the agent fills in their bytes from
// Turn.Files (a FileLoader), checks them against the stored hash, prepares
// images (provider.PrepareImage) and keeps the result for the turn and in
// a bounded process-wide cache, so every step sends the same bytes. What
// cannot be sent (Options.NoImages, a failed load, over the request's
// limits, an endpoint that refused media) becomes a note naming the file.
// An endpoint's refusal of media (provider.ErrMediaUnsupported) is retried
// once with notes. Parts are counted by the providers' formulas (images
// by size, PDFs by pages), and compaction summarizes them as notes. A tool
// that implements PartsTool may return images too.
//
// # Results kept for the turn only
//
// A tool whose data source forbids keeping its results (Slack's search)
// marks a call's result with TurnOnly. The model gets it in every
// request of that turn; checkpoints, Result, the compaction summarizer
// and captured span content get the tool's placeholder instead, so no
// transcript ever holds it (turnonly.go).
//
// # Interrupted turns
//
// When ctx ends, Run stops the stream or the tools, records the partial
// answer as an assistant message with Interrupted set, answers every tool
// call left without a result with an "interrupted" error result, saves that
// with a short context detached from ctx, and returns Outcome Cancelled with
// an error that wraps both ctx.Err() and context.Cause(ctx).
//
// agent knows nothing of Slack, Redis or MCP: it must not import bot, session,
// mcp, slack-go, go-redis or the MCP SDK. It may import provider.
package agent
