package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/provider/internal/jsondec"
)

// wireEvent is the union of every stream event's fields we read. Unknown
// events and fields are ignored.
type wireEvent struct {
	Type         wireType      `json:"type"`
	Index        int           `json:"index"`
	Message      *wireStart    `json:"message"`
	ContentBlock wireBlock     `json:"content_block"`
	Delta        wireDelta     `json:"delta"`
	Usage        *wireUsage    `json:"usage"`
	Error        *wireErrorObj `json:"error"`
}

// wireType is a "type" value. Decoding returns constant strings for the
// known values, so the hot path (one content_block_delta per token) does
// not allocate for them.
type wireType string

func (t *wireType) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		if k, ok := knownType(b[1 : len(b)-1]); ok {
			*t = k
			return nil
		}
	}
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != nil {
		*t = wireType(*s)
	}
	return nil
}

func knownType(b []byte) (wireType, bool) {
	switch string(b) {
	case "content_block_delta":
		return "content_block_delta", true
	case "text_delta":
		return "text_delta", true
	case "input_json_delta":
		return "input_json_delta", true
	case "thinking_delta":
		return "thinking_delta", true
	case "signature_delta":
		return "signature_delta", true
	case "content_block_start":
		return "content_block_start", true
	case "content_block_stop":
		return "content_block_stop", true
	case "text":
		return "text", true
	case "tool_use":
		return "tool_use", true
	case "thinking":
		return "thinking", true
	case "ping":
		return "ping", true
	}
	return "", false
}

type wireStart struct {
	Usage *wireUsage `json:"usage"`
}

type wireBlock struct {
	Type      wireType `json:"type"`
	Text      string   `json:"text"`
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Thinking  string   `json:"thinking"`
	Signature string   `json:"signature"`
	Data      string   `json:"data"`
	// input (the placeholder {} of a tool_use) is deliberately not read.
}

type wireDelta struct {
	Type        wireType `json:"type"`
	Text        string   `json:"text"`
	PartialJSON string   `json:"partial_json"`
	Thinking    string   `json:"thinking"`
	Signature   string   `json:"signature"`
	StopReason  string   `json:"stop_reason"`
}

// wireUsage has pointers because message_delta usage is cumulative and
// overwrites only the fields it carries.
type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
}

type wireErrorObj struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type blockKind uint8

const (
	blockOther blockKind = iota
	blockText
	blockToolUse
	blockThinking
	blockRedacted
)

// block is one content block being assembled.
type block struct {
	index    int
	kind     blockKind
	stopped  bool
	id, name string
	buf      strings.Builder // tool_use input JSON or thinking text
	sig      string
	data     string
}

// maxBlocks bounds the content blocks of one message, so a hostile stream
// cannot grow the decoder without limit.
const maxBlocks = 1024

// decoder turns the data of Anthropic stream events into provider.Events.
// It is a pure state machine: feed it each SSE event, take the events it
// queued in out, and call end at EOF.
type decoder struct {
	out []provider.Event

	blocks    []*block
	text      strings.Builder
	usage     usageState
	rawStop   string
	finished  bool
	scratchEv wireEvent
	json      jsondec.Decoder
}

type usageState struct {
	known                         bool
	input, output, read, creation int
}

func (u *usageState) apply(w *wireUsage) {
	if w == nil {
		return
	}
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
			u.known = true
		}
	}
	set(&u.input, w.InputTokens)
	set(&u.output, w.OutputTokens)
	set(&u.read, w.CacheReadInputTokens)
	set(&u.creation, w.CacheCreationInputTokens)
}

func (u usageState) normalized() provider.Usage {
	if !u.known {
		return provider.Usage{}
	}
	return provider.Usage{
		InputTokens:      u.input + u.read + u.creation,
		OutputTokens:     u.output,
		CacheReadTokens:  u.read,
		CacheWriteTokens: u.creation,
		Known:            true,
	}
}

// done reports whether message_stop was seen; later data is ignored.
func (d *decoder) done() bool { return d.finished }

// feed decodes one SSE event. sseType is the event: field (may be empty);
// dispatch is on the JSON "type", since some endpoints omit event: lines.
func (d *decoder) feed(sseType, data string) error {
	if d.finished {
		return nil
	}
	ev := &d.scratchEv
	*ev = wireEvent{}
	if err := d.json.UnmarshalString(data, ev); err != nil {
		return fmt.Errorf("anthropic: decoding %q event: %w", sseType, err)
	}
	typ := ev.Type
	if typ == "" {
		typ = wireType(sseType)
	}
	switch typ {
	case "message_start":
		if ev.Message != nil {
			d.usage.apply(ev.Message.Usage)
		}
	case "content_block_start":
		return d.blockStart(ev)
	case "content_block_delta":
		return d.blockDelta(ev)
	case "content_block_stop":
		if b := d.block(ev.Index); b != nil {
			b.stopped = true
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			d.rawStop = ev.Delta.StopReason
		}
		d.usage.apply(ev.Usage)
	case "message_stop":
		d.finish()
	case "error":
		e := ev.Error
		if e == nil {
			e = &wireErrorObj{Type: "api_error"}
		}
		return classify(0, e.Type, e.Message)
	}
	// ping and unknown events are ignored.
	return nil
}

func (d *decoder) block(index int) *block {
	for i := len(d.blocks) - 1; i >= 0; i-- {
		if d.blocks[i].index == index {
			return d.blocks[i]
		}
	}
	return nil
}

func (d *decoder) blockStart(ev *wireEvent) error {
	if d.block(ev.Index) != nil {
		return fmt.Errorf("anthropic: content block %d started twice", ev.Index)
	}
	if len(d.blocks) >= maxBlocks {
		return fmt.Errorf("anthropic: more than %d content blocks", maxBlocks)
	}
	b := &block{index: ev.Index}
	d.blocks = append(d.blocks, b)
	cb := &ev.ContentBlock
	switch cb.Type {
	case "text":
		b.kind = blockText
		d.textDelta(cb.Text)
	case "tool_use":
		// The start carries a placeholder input {}; the real input arrives
		// as input_json_delta fragments.
		b.kind = blockToolUse
		b.id, b.name = cb.ID, cb.Name
	case "thinking":
		b.kind = blockThinking
		b.sig = cb.Signature
		d.thinkingDelta(b, cb.Thinking)
	case "redacted_thinking":
		// Arrives whole; passed back as is.
		b.kind = blockRedacted
		b.data = cb.Data
	}
	return nil
}

func (d *decoder) blockDelta(ev *wireEvent) error {
	b := d.block(ev.Index)
	if b == nil {
		return fmt.Errorf("anthropic: delta for unknown content block %d", ev.Index)
	}
	dl := &ev.Delta
	switch dl.Type {
	case "text_delta":
		if b.kind == blockText {
			d.textDelta(dl.Text)
		}
	case "input_json_delta":
		if b.kind == blockToolUse {
			b.buf.WriteString(dl.PartialJSON)
		}
	case "thinking_delta":
		if b.kind == blockThinking {
			d.thinkingDelta(b, dl.Thinking)
		}
	case "signature_delta":
		if b.kind == blockThinking {
			b.sig += dl.Signature
		}
	}
	return nil
}

func (d *decoder) textDelta(s string) {
	if s == "" {
		return
	}
	d.text.WriteString(s)
	d.out = append(d.out, provider.Event{Type: provider.EventTextDelta, Text: s})
}

func (d *decoder) thinkingDelta(b *block, s string) {
	if s == "" {
		return
	}
	b.buf.WriteString(s)
	d.out = append(d.out, provider.Event{Type: provider.EventReasoningDelta, Text: s})
}

// finish handles message_stop: it maps the stop reason, queues the tool
// calls (only when they are to run) and the done event.
func (d *decoder) finish() {
	d.finished = true
	msg := &provider.Message{Role: provider.RoleAssistant, Content: d.text.String()}
	var calls []provider.ToolCall
	for _, b := range d.blocks {
		switch b.kind {
		case blockThinking:
			msg.Reasoning = append(msg.Reasoning, provider.Reasoning{Text: b.buf.String(), Signature: b.sig})
		case blockRedacted:
			msg.Reasoning = append(msg.Reasoning, provider.Reasoning{Redacted: b.data})
		case blockToolUse:
			// A tool_use without content_block_stop was cut off.
			if !b.stopped {
				continue
			}
			args := b.buf.String()
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			calls = append(calls, provider.ToolCall{ID: b.id, Name: b.name, Arguments: args})
		}
	}
	stop := mapStop(d.rawStop, len(calls) > 0)
	// Tool calls are offered only when they are to run: after max_tokens
	// their JSON may be cut, after a refusal they were not meant to run.
	if stop == provider.StopToolUse {
		msg.ToolCalls = calls
		for _, c := range calls {
			d.out = append(d.out, provider.Event{Type: provider.EventToolCall, ToolCall: c})
		}
	}
	d.out = append(d.out, provider.Event{
		Type:          provider.EventDone,
		Message:       msg,
		StopReason:    stop,
		RawStopReason: d.rawStop,
		Usage:         d.usage.normalized(),
	})
}

// mapStop maps Anthropic's stop_reason (providers.md §8).
func mapStop(raw string, haveCalls bool) provider.StopReason {
	switch raw {
	case "tool_use", "end_turn", "stop_sequence":
		if haveCalls {
			return provider.StopToolUse
		}
		if raw == "tool_use" {
			// tool_use with no complete call: nothing to run.
			return provider.StopOther
		}
		return provider.StopEndTurn
	case "max_tokens", "model_context_window_exceeded":
		return provider.StopMaxTokens
	}
	// refusal, pause_turn, missing and unknown values.
	return provider.StopOther
}

// end is called at EOF: a stream without message_stop is truncated.
func (d *decoder) end() error {
	if !d.finished {
		return fmt.Errorf("anthropic: stream ended without message_stop: %w", provider.ErrTruncated)
	}
	return nil
}
