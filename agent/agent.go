package agent

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/bobbinbot/bobbin/provider"
)

// Options configure an Agent. Zero values mean the defaults noted on each
// field.
type Options struct {
	// Model is sent with every request and chooses the tokenizer encoding
	// and the calibration seed.
	Model string
	// MaxTokens caps each response; zero leaves it to the provider.
	MaxTokens int
	// ContextWindow is the model's context size in tokens (default 128000).
	ContextWindow int
	// CompactAt is the fraction of ContextWindow past which the history is
	// compacted before the next model call (default 0.75).
	CompactAt float64
	// KeepRecent is how many of the latest messages compaction keeps
	// verbatim (default 6); it keeps more when that would split a tool call
	// from its results.
	KeepRecent int
	// StepLimit is the number of model calls per turn (default 20).
	StepLimit int
	// Parallelism bounds how many tool calls of one step run at once
	// (default 4).
	Parallelism int
	// ToolTimeout bounds one tool call (default 60 s).
	ToolTimeout time.Duration
	// ApprovalTimeout bounds one wait for the Approver (default 10 min); a
	// timeout counts as Deny.
	ApprovalTimeout time.Duration
	// OutputCap is the most bytes of one tool result fed to the model
	// (default 32 KiB); longer output is cut with a visible marker.
	OutputCap int
	// TurnOutputCap is the most bytes of tool output fed to the model in one
	// turn (default 128 KiB).
	TurnOutputCap int
	// NoImages turns image and PDF input off (LLM_IMAGES=false): such parts
	// reach the model as a short note.
	NoImages bool
	// ImageLimits bound images as sent; zero fields mean the provider
	// package's defaults (see provider.PrepareImage).
	ImageLimits provider.ImageLimits
	// MaxRequestMedia and MaxRequestMediaBytes bound the images and PDFs
	// of one request, newest first (defaults DefaultMaxRequestMedia and
	// DefaultMaxRequestMediaBytes); older ones become notes.
	MaxRequestMedia      int
	MaxRequestMediaBytes int
	// MediaCacheBytes bounds the process's cache of prepared images and
	// PDFs (default DefaultMediaCacheBytes).
	MediaCacheBytes int
	// Counter counts tokens; nil means NewCounter(Model). Share one Counter
	// per model across agents: it holds the tokenizer and a count cache.
	Counter *Counter
	// Logger receives warnings; nil discards. Tool arguments and outputs are
	// never logged.
	Logger *slog.Logger
	// Tracer opens the spans of model and tool calls (trace.go); nil
	// means none. ProviderName is gen_ai.provider.name on them
	// ("openai", "anthropic"). CaptureContent puts prompts, answers and
	// tool arguments and results on spans
	// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT); off by default.
	Tracer         trace.Tracer
	ProviderName   string
	CaptureContent bool
}

// Defaults applied by New.
const (
	DefaultContextWindow   = 128000
	DefaultCompactAt       = 0.75
	DefaultKeepRecent      = 6
	DefaultStepLimit       = 20
	DefaultParallelism     = 4
	DefaultToolTimeout     = 60 * time.Second
	DefaultApprovalTimeout = 10 * time.Minute
	DefaultOutputCap       = 32 << 10
	DefaultTurnOutputCap   = 128 << 10
)

// Agent runs turns against one provider and model. It is safe for
// concurrent use: one Agent serves every session of a process; per-turn
// state lives in Turn and Result.
type Agent struct {
	p       provider.Provider
	opts    Options
	counter *Counter
	log     *slog.Logger
	schemas *schemaCache

	media     *mediaCache   // prepared images and PDFs, by file hash
	prep      chan struct{} // bounds concurrent image decodes
	mediaWarn sync.Once     // the endpoint-refused-media warning
}

// New returns an Agent that calls p. It never fails: if no tokenizer can be
// built for opts.Model, token counts fall back to a byte-length estimate
// (logged once).
func New(p provider.Provider, opts Options) *Agent {
	opts.ContextWindow = cmp.Or(opts.ContextWindow, DefaultContextWindow)
	opts.CompactAt = cmp.Or(opts.CompactAt, DefaultCompactAt)
	opts.KeepRecent = cmp.Or(opts.KeepRecent, DefaultKeepRecent)
	opts.StepLimit = cmp.Or(opts.StepLimit, DefaultStepLimit)
	opts.Parallelism = cmp.Or(opts.Parallelism, DefaultParallelism)
	opts.ToolTimeout = cmp.Or(opts.ToolTimeout, DefaultToolTimeout)
	opts.ApprovalTimeout = cmp.Or(opts.ApprovalTimeout, DefaultApprovalTimeout)
	opts.OutputCap = cmp.Or(opts.OutputCap, DefaultOutputCap)
	opts.TurnOutputCap = cmp.Or(opts.TurnOutputCap, DefaultTurnOutputCap)
	opts.MaxRequestMedia = cmp.Or(opts.MaxRequestMedia, DefaultMaxRequestMedia)
	opts.MaxRequestMediaBytes = cmp.Or(opts.MaxRequestMediaBytes, DefaultMaxRequestMediaBytes)
	opts.MediaCacheBytes = cmp.Or(opts.MediaCacheBytes, DefaultMediaCacheBytes)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := opts.Counter
	if c == nil {
		var err error
		c, err = NewCounter(opts.Model)
		if err != nil {
			log.Warn("agent: no tokenizer, estimating tokens from bytes", "model", opts.Model, "err", err)
		}
	}
	return &Agent{p: p, opts: opts, counter: c, log: log, schemas: newSchemaCache(),
		media: newMediaCache(opts.MediaCacheBytes), prep: make(chan struct{}, prepareParallel)}
}

// ImagesEnabled reports whether images and PDFs reach the model
// (LLM_IMAGES); when false the bot may skip downloading them and attach
// notes instead.
func (a *Agent) ImagesEnabled() bool { return !a.opts.NoImages }

// Turn is the input of one Run.
type Turn struct {
	// System is the system prompt. Keep it byte-stable for the whole session
	// (put the date in at session start) so prompt caches hit.
	System string
	// History is the transcript so far, the new user message(s) already
	// appended. It may end in an assistant message whose tool calls have no
	// results yet (a turn cut short): Run then runs, or re-asks approval
	// for, those calls before calling the model. Run does not modify it.
	History []provider.Message
	// Tools are offered to the model; Run sorts them by name.
	Tools []Tool
	// Grants are the tools the person allowed for this session ("always
	// allow in this thread"), as GrantKey: a grant given for another
	// definition of a tool (another Hints.Pin) does not apply.
	Grants []string
	// GrantValid, if set, is asked (with the grant's GrantKey) before a
	// call runs on the strength of a grant; false means the grant was
	// revoked since (the Revoke button): the grant is dropped and the
	// person is asked again. An implementation that cannot tell should
	// answer false.
	GrantValid func(ctx context.Context, grant string) bool
	// Approver asks a person about calls the policy does not allow; nil
	// denies every such call.
	Approver Approver
	// Observer receives progress; nil discards it.
	Observer Observer
	// Files loads the images and PDFs History refers to (by
	// provider.FileRef) for this turn's requests, with this workspace's
	// credentials; nil means only parts that carry Data are sent, the
	// others become notes.
	Files FileLoader
	// Checkpoint is called with every completed step before the next one
	// starts. An error ends the turn with that error (for example a stale
	// fencing token): nothing more is appended. nil skips checkpoints.
	// Results a tool marked TurnOnly are checkpointed as their
	// placeholders.
	Checkpoint func(ctx context.Context, cp Checkpoint) error
	// Calibration is the persisted tokens ratio for this model (provider
	// tokens per local tokenizer token); 0 means the model's seed.
	Calibration float64
	// Anchor is the last usage anchor the caller persisted; the zero value
	// means none.
	Anchor Anchor

	// Model, when set, replaces Options.Model for this turn (a channel's
	// profile); MaxTokens caps responses (never above Options.MaxTokens
	// when that is set); Provider, when set, serves this turn's calls.
	Model     string
	MaxTokens int
	Provider  provider.Provider
	// ProviderName names Provider on spans (default Options.ProviderName).
	ProviderName string
	// Budget is checked before every model call and told its usage; nil
	// means no budget.
	Budget Budget
}

// Checkpoint is one completed step, handed to Turn.Checkpoint.
type Checkpoint struct {
	// Append are the messages to append to the transcript.
	Append []provider.Message
	// Replace means compaction: Append is the whole new history and
	// replaces the stored one.
	Replace bool
	// Grants are the session's grants after this step.
	Grants []string
	// Usage is the usage of the model call of this step (zero for tool
	// result steps).
	Usage provider.Usage
	// Calibration and Anchor are the token-budget state to persist.
	Calibration float64
	Anchor      Anchor
}

// Outcome says why a turn ended.
type Outcome int

const (
	// EndTurn: the model finished its answer.
	EndTurn Outcome = iota
	// StepLimit: the turn made Options.StepLimit model calls.
	StepLimit
	// LoopGuard: the model asked for the same call (tool and arguments) a
	// third time in one turn.
	LoopGuard
	// Cancelled: ctx ended (Stop button, shutdown); the transcript was left
	// consistent and marked interrupted.
	Cancelled
	// MaxTokens: the response hit the output limit; no tools ran.
	MaxTokens
	// Stopped: the model stopped for another reason (refusal, content
	// filter, unknown stop value).
	Stopped
	// Failed: a provider or checkpoint error ended the turn; Run returns it.
	Failed
	// OverBudget: Turn.Budget refused the next model call; Notice says
	// which limit and when it resets.
	OverBudget
)

func (o Outcome) String() string {
	switch o {
	case EndTurn:
		return "end_turn"
	case StepLimit:
		return "step_limit"
	case LoopGuard:
		return "loop_guard"
	case Cancelled:
		return "cancelled"
	case MaxTokens:
		return "max_tokens"
	case Stopped:
		return "stopped"
	case Failed:
		return "failed"
	case OverBudget:
		return "over_budget"
	}
	return "unknown"
}

// Result is the outcome of one Run.
type Result struct {
	// Messages is the whole transcript after the turn: History with this
	// turn's messages appended, or the compacted history plus them.
	// TurnOnly results are their placeholders here, as in checkpoints.
	Messages []provider.Message
	// Text is the final visible answer: the text of the last assistant
	// message of the turn that has text (partial if interrupted).
	Text string
	// Notice is a short message for the person when the turn ended early
	// (step limit, loop guard, max tokens, stopped); empty otherwise.
	Notice string
	// Outcome says why the turn ended.
	Outcome Outcome
	// Usage sums every model call of the turn, summaries included. Use
	// Usage.CacheReadShare for the cached share of input.
	Usage provider.Usage
	// Grants are the session's grants after the turn, sorted.
	Grants []string
	// Calibration and Anchor are the token-budget state to persist.
	Calibration float64
	Anchor      Anchor
	// Steps is the number of model calls made (summaries excluded).
	Steps int
	// Compacted is true when the history was replaced during the turn.
	Compacted bool
}

// ErrHandOver, as (or wrapped in) the cause of a turn's cancellation,
// says the turn is handed over to another holder that resumes it from the
// transcript (a replica shutting down): the tool calls of the current step
// that were not started are left without a result, so the next holder
// decides and runs them, instead of being answered "interrupted".
var ErrHandOver = errors.New("agent: turn handed over")

// Run runs one turn: it calls the model, runs the tools it asks for, and
// repeats until the model ends its turn, a stop condition hits, or ctx ends.
//
// Errors: a provider error (after the provider's own retries, and after one
// compaction retry for context-length errors) or a checkpoint error ends the
// turn with Outcome Failed and is returned wrapped. When ctx ends, Run
// leaves the transcript consistent (partial answer marked Interrupted,
// unanswered tool calls answered "interrupted", or left for the next holder
// when the cause is ErrHandOver), returns Outcome Cancelled
// and an error wrapping context.Cause(ctx), so errors.Is(err,
// context.Canceled) and a caller's own cause both match. Result is always
// filled in as far as the turn got.
func (a *Agent) Run(ctx context.Context, t Turn) (Result, error) {
	r := newRun(a, t)
	return r.run(ctx)
}
