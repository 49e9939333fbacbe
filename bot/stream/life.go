package stream

// Streams and Slack's lifetime (reference slack-agents-2026.md §3). Slack
// finalizes a native stream about 5 minutes after it starts; appends and
// stopStream then answer message_not_in_streaming_state and the message
// is stuck unless chat.update rewrites it. A turn that waits on a person
// (an approval, a server's question) can easily outlive that, so the
// stream is closed before the wait: the text so far stays in the stream's
// message (rewritten with chat.update to be sure it is whole) and the rest
// of the answer goes below the prompt in messages of its own (edit path,
// reply.go). A stream is also closed proactively once it is
// Options.StreamLifetime old (default 4m30s), whether or not text is
// coming (Run's ticks check its age): the text not yet appended goes out
// with the stop, and the reply goes on with chat.update on the same
// message, which from then on is edited like an edit-mode message: it
// carries the Stop button until the final edit (then the feedback
// buttons) and the turn's tool calls as task_card blocks, so a card that
// was running at the stop ends complete or failed (cardblocks.go). The
// operator sets the lifetime (STREAM_LIFETIME, below 5 minutes). These
// stops leave the agent session in the turn's status
// (session_status processing, or suspended before a wait); the stop that
// ends the turn leaves it active. A stream that runs into the limit
// anyway (refused with message_not_in_streaming_state) falls back the
// same way on the first refused call; the final text is therefore
// always complete.

// waitsOnPerson reports whether the turn has waited, or waits, on a
// person since the reply started: the answer is then split at the prompt.
func (r *Reply) waitsOnPerson() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.breaks) > 0
}
