package bot

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"go.opentelemetry.io/otel/trace"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
	agentask "github.com/bobbinbot/bobbin/agent/ask"
	"github.com/bobbinbot/bobbin/bot/admin"
	"github.com/bobbinbot/bobbin/bot/ask"
	"github.com/bobbinbot/bobbin/bot/install"
	"github.com/bobbinbot/bobbin/bot/internal/jobs"
	"github.com/bobbinbot/bobbin/bot/internal/pause"
	"github.com/bobbinbot/bobbin/bot/people"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/bot/stream"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// Store is the bot's view of the session store (*session.Store): the
// turn state below and the store side of every feature, each declared
// next to the feature that uses it. All of it is required, so a store
// missing a method fails to build rather than switching a feature off.
type Store interface {
	turnStore
	slackapi.Budget // the shared Slack API budgets (slackapi)
	install.Store   // installations and retired workspaces (bot/install)
	controlStore    // audit (audit.go)
	ask.Store       // approvals, grants, questions, Connect notices (bot/ask)
	admin.Store     // audit listing, OAuth cleanup, profiles, usage, votes (bot/admin)
	people.Store    // user group members (bot/people)
	meterStore      // usage limits (profile.go)
	stopStore       // Stop across replicas (stopreq.go)
	grantChecker    // thread grants (turn.go)
	metaReader      // a thread's metadata alone (stopreq.go)
	takeoverStore   // orphaned threads (takeover.go)
	markedEnqueuer  // marked queues (takeover.go)
	paneStore       // the assistant pane (assistant.go)
	searchStore     // whether workspaces have Slack search (search.go)
}

// turnStore is the store side of admission, workers and turns.
type turnStore interface {
	Ping(ctx context.Context) error
	Admit(ctx context.Context, team, eventID, channel, ts string) (bool, error)
	Forget(ctx context.Context, team, eventID, channel, ts string) error
	Exists(ctx context.Context, k session.ThreadKey) (bool, error)
	Acquire(ctx context.Context, k session.ThreadKey, owner string) (*session.Lease, error)
	Dequeue(ctx context.Context, k session.ThreadKey, fence int64) ([]byte, bool, error)
	Load(ctx context.Context, k session.ThreadKey) (session.Meta, []provider.Message, error)
	Append(ctx context.Context, k session.ThreadKey, fence int64, msgs ...provider.Message) error
	Replace(ctx context.Context, k session.ThreadKey, fence int64, msgs []provider.Message) error
	SaveMeta(ctx context.Context, k session.ThreadKey, fence int64, m session.Meta) error
	Take(ctx context.Context, bucket string, perMinute, burst int) (bool, time.Duration, error)
	feedbackStore // votes on answers (feedback.go)
}

// Runner runs one agent turn (*agent.Agent).
type Runner interface {
	Run(ctx context.Context, t agent.Turn) (agent.Result, error)
}

// ToolSource gives the tools a turn may use (the mcp Manager): those of
// the workspace's servers whose scope allows a (where the turn runs, whose
// messages it answers), each checking a again when called. The bot does not
// import mcp: cmd/bot adapts the Manager.
type ToolSource interface {
	Tools(ctx context.Context, a access.Access) ([]agent.Tool, error)
}

// MaxStreamLifetime bounds Options.StreamLifetime (STREAM_LIFETIME): Slack
// ends a native stream about 5 minutes after it starts, so a reply must
// close it before then (bot/stream life.go).
const MaxStreamLifetime = 5 * time.Minute

// Stream modes (STREAM_MODE).
const (
	StreamEdit   = "edit"
	StreamNative = "native"
	StreamAuto   = "auto"
)

// Options configure a Bot. Zero values mean the defaults noted.
type Options struct {
	// BotToken (xoxb-) and AppToken (xapp-) authenticate the Web API and
	// socket mode. APIURL is the Web API base, ending in "/" (default
	// https://slack.com/api/). BotToken may be empty when Installs is on:
	// then only installed workspaces are served.
	BotToken, AppToken, APIURL string
	// Installs turns on OAuth installations (bot/install): each
	// workspace that installs the app gets its own token, kept sealed in
	// Store.
	Installs install.Options
	// HTTPClient carries Web API calls and the socket dial's HTTP part; nil
	// means a client with sane timeouts.
	HTTPClient *http.Client

	Store  Store
	Agent  Runner
	Tools  ToolSource // nil: no tools
	Logger *slog.Logger
	// Metrics; nil means unregistered instruments.
	Metrics *Metrics

	// Model names the model in session metadata.
	Model string
	// SystemPrompt is the operator's addition to the default system prompt.
	SystemPrompt string
	// StreamMode is StreamEdit (default), StreamNative or StreamAuto.
	StreamMode string
	// EditInterval is the least time between two edits of one message
	// (default 1 s).
	EditInterval time.Duration
	// StreamLifetime is how long a native stream is used before the reply
	// closes it and goes on with chat.update on the same message (default
	// stream.DefaultStreamLifetime, 4m30s): Slack ends a stream about 5
	// minutes after it starts. It must be positive and below 5 minutes.
	StreamLifetime time.Duration
	// UpdatesPerMinute is the workspace's chat.update budget shared by all
	// replicas (default 45: Tier 3 is about 50). RateLimits, when set,
	// wins.
	UpdatesPerMinute int
	// RateLimits are the Web API budgets by method (slackapi.DefaultRateLimits,
	// with slackapi.ParseRateLimits for SLACK_RATE_LIMITS); nil means the defaults
	// with chat.update at UpdatesPerMinute.
	RateLimits map[string]slackapi.RateLimit
	// MaxConcurrentTurns bounds the turns this process runs at once
	// (default 32).
	MaxConcurrentTurns int
	// UserTurnsPerMinute is how many turns a person may start a minute
	// (default 10).
	UserTurnsPerMinute int
	// Admins are user ids allowed to administer the bot.
	Admins []string
	// AllowBots lets messages from other bots start turns.
	AllowBots bool
	// SocketConnections is the number of socket-mode connections (default 1).
	SocketConnections int
	// ShutdownGrace bounds how long running turns may take to checkpoint on
	// shutdown (default 25 s).
	ShutdownGrace time.Duration
	// ReplicaID names this process in leases (default random).
	ReplicaID string
	// PingInterval is socket mode's liveness window (default 30 s).
	PingInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// MCP administers the workspaces' MCP servers for /bobbin mcp (nil:
	// those commands say MCP is not available; bot/admin). cmd/bot adapts
	// the mcp.Manager.
	MCP admin.MCP
	// ApprovalTimeout is how long a tool-call approval prompt waits before
	// the call is denied (APPROVAL_TIMEOUT, default 10 min). Keep the
	// agent's own ApprovalTimeout at least this long. A server's question
	// (Ask) waits as long.
	ApprovalTimeout time.Duration
	// CheckForm validates a form answer against its fields and returns a
	// message per failing field name ("" for the form as a whole); cmd/bot
	// sets mcp.ValidateElicitContent. Nil checks required fields only.
	CheckForm func(fields []agentask.Field, content map[string]any) map[string]string
	// UsergroupCacheTTL is how long a user group's members are reused, by
	// every replica, before usergroups.users.list is asked again
	// (USERGROUP_CACHE_TTL, default people.DefaultUsergroupCacheTTL).
	UsergroupCacheTTL time.Duration
	// ToolFileMaxBytes is the largest file a tool returns that is
	// uploaded into the thread (TOOL_FILE_MAX_BYTES, default
	// DefaultToolFileMaxBytes; toolfiles.go).
	ToolFileMaxBytes int64

	// Thread context and files (threadctx.go, files.go).
	//
	// ThreadFollowups is FollowupsAll (default) or FollowupsMention
	// (THREAD_FOLLOWUPS).
	ThreadFollowups string
	// ThreadContextMessages is how many of a thread's earlier messages its
	// first turn reads (THREAD_CONTEXT_MESSAGES; 0 means
	// DefaultThreadContextMessages, negative reads none).
	ThreadContextMessages int
	// ContextWindow is the model's context window in tokens
	// (LLM_CONTEXT_WINDOW, default agent.DefaultContextWindow);
	// ThreadContextShare of it (default DefaultThreadContextShare) is what
	// imported thread messages may take.
	ContextWindow      int
	ThreadContextShare float64
	// ThreadCache keeps the messages the bot receives per thread, so
	// imports read Redis before Slack (threadcache.go); nil (no
	// SECRET_KEY) reads Slack only.
	ThreadCache ThreadCache
	// Tokens counts tokens for that share (an *agent.Counter); nil
	// estimates four bytes a token.
	Tokens TokenCounter

	// Profiles are the operator's agent profiles and budgets (profile.go).
	Profiles ProfileOptions
	// Tracer opens each turn's invoke_agent span; nil means none.
	Tracer trace.Tracer
}

// TokenCounter counts the tokens of a text (*agent.Counter). Bound is an
// upper bound of Count that needs no tokenizer, asked first so the
// tokenizer is built only when an exact count can change what is kept.
type TokenCounter interface {
	Count(s string) int
	Bound(s string) int
}

// Bot is the Slack frontend. Build it with New, run it with Run.
type Bot struct {
	opts Options
	api  *slack.Client // use client(team)
	gov  *slackapi.Governor
	// slack is the only path to the Web API (the governor, then the
	// workspace's client: slackapi.Client.Do).
	slack *slackapi.Client
	store Store
	log   *slog.Logger
	m     *Metrics

	// identity of the pinned BotToken, from auth.test
	botUserID, botID, teamID, pinnedEnterprise string

	// ws serves each workspace: the pinned token alone or installations
	// (workspaces.go); httpc is the governed HTTP client every Slack
	// client uses.
	ws    workspaces
	httpc *http.Client

	turnSlots chan struct{} // MAX_CONCURRENT_TURNS
	admitSem  chan struct{} // envelopes being admitted at once

	cancels cancelRegistry

	sockets  atomic.Int32
	draining atomic.Bool
	cacheOff atomic.Bool   // the thread cache failed for want of SECRET_KEY
	search   searchAvail   // which workspaces have Slack search (search.go)
	cool     cooldown      // socket back-off after too_many_websockets
	authed   atomic.Bool   // Authenticate succeeded
	health   socketHealth  // why no socket is open (startup.go)
	dials    atomic.Uint64 // sockets dialed so far (connections.go)

	// workers tracks thread workers (they outlive a socket connection).
	workers sync.WaitGroup
	// running maps a thread to its local worker so one process runs at most
	// one worker per thread.
	mu      sync.Mutex
	running map[session.ThreadKey]bool

	// people is who people are, who is in a user group and what things
	// are called (bot/people).
	people *people.Directory
	// jobs is the work after an ack: slash commands answered later (a probe
	// takes seconds, more than an ack may wait), prompt updates waiting on
	// the budget, Home buttons. Run closes it on shutdown and waits.
	jobs *jobs.Runner
	// waits is what running turns wait on people for (waits.go).
	waits personWaits
	// ask posts approvals, questions and Connect prompts (prompts.go).
	ask *ask.Prompts
	// admin is /bobbin, the add-server form and the App Home (bot/admin).
	admin *admin.Admin

	// files downloads shared files (download.go).
	files *fileFetcher
	// agents: workspaces refusing agent sessions (bot/stream).
	agents stream.Sessions
}

// New checks opts and builds a Bot. It does not contact Slack.
func New(opts Options) (*Bot, error) {
	var errs []error
	if opts.AppToken == "" {
		errs = append(errs, errors.New("bot: AppToken is required"))
	}
	if opts.Installs.ClientID != "" {
		if opts.Installs.ClientSecret == "" || opts.Installs.RedirectURL == "" {
			errs = append(errs, errors.New("bot: Installs needs ClientSecret and RedirectURL"))
		}
	} else if opts.BotToken == "" {
		errs = append(errs, errors.New("bot: BotToken is required (or Installs)"))
	}
	if opts.Store == nil {
		errs = append(errs, errors.New("bot: Store is required"))
	}
	if opts.Agent == nil {
		errs = append(errs, errors.New("bot: Agent is required"))
	}
	if opts.StreamLifetime < 0 || opts.StreamLifetime >= MaxStreamLifetime {
		errs = append(errs, fmt.Errorf("bot: StreamLifetime must be positive and below %v (Slack ends a stream about then)", MaxStreamLifetime))
	}
	switch opts.ThreadFollowups {
	case "", FollowupsAll, FollowupsMention:
	default:
		errs = append(errs, fmt.Errorf("bot: ThreadFollowups must be %q or %q", FollowupsAll, FollowupsMention))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	opts.APIURL = cmp.Or(opts.APIURL, slack.APIURL)
	opts.StreamMode = cmp.Or(opts.StreamMode, StreamEdit)
	opts.EditInterval = cmp.Or(opts.EditInterval, time.Second)
	opts.StreamLifetime = cmp.Or(opts.StreamLifetime, stream.DefaultStreamLifetime)
	opts.UpdatesPerMinute = cmp.Or(opts.UpdatesPerMinute, 45)
	opts.MaxConcurrentTurns = cmp.Or(opts.MaxConcurrentTurns, 32)
	opts.UserTurnsPerMinute = cmp.Or(opts.UserTurnsPerMinute, 10)
	opts.SocketConnections = cmp.Or(opts.SocketConnections, 1)
	opts.ShutdownGrace = cmp.Or(opts.ShutdownGrace, 25*time.Second)
	opts.PingInterval = cmp.Or(opts.PingInterval, 30*time.Second)
	opts.ThreadFollowups = cmp.Or(opts.ThreadFollowups, FollowupsAll)
	opts.ThreadContextMessages = cmp.Or(opts.ThreadContextMessages, DefaultThreadContextMessages)
	opts.ContextWindow = cmp.Or(opts.ContextWindow, agent.DefaultContextWindow)
	opts.ThreadContextShare = cmp.Or(opts.ThreadContextShare, DefaultThreadContextShare)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReplicaID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		opts.ReplicaID = "r" + hex.EncodeToString(b[:])
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := opts.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	limits := opts.RateLimits
	if limits == nil {
		limits = slackapi.DefaultRateLimits()
		u := limits[slackapi.ChatUpdate]
		u.PerMinute = opts.UpdatesPerMinute
		limits[slackapi.ChatUpdate] = u
	}
	gov := slackapi.NewGovernor(opts.Store, limits, m.api, log, max(30*time.Second, 10*opts.EditInterval))
	governed := *hc
	governed.Transport = slackapi.NewTransport(cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport), gov, m.api)
	b := &Bot{
		opts:      opts,
		gov:       gov,
		httpc:     &governed,
		store:     opts.Store,
		log:       log,
		m:         m,
		turnSlots: make(chan struct{}, opts.MaxConcurrentTurns),
		admitSem:  make(chan struct{}, 64),
		cancels:   cancelRegistry{m: map[session.ThreadKey]context.CancelCauseFunc{}},
		running:   map[session.ThreadKey]bool{},
		files:     newFileFetcher(hc.Transport, opts.APIURL, m),
		jobs:      jobs.New(log, jobTimeout),
	}
	b.api = b.newClient(opts.BotToken)
	b.ws = b.newWorkspaces(opts)
	b.slack = slackapi.New(gov, b.ws, log)
	b.people = b.newPeople() // access.go
	b.ask = b.newPrompts()   // prompts.go
	b.admin = b.newAdmin()   // admin.go
	b.collectFeedbackVotes() // feedback.go
	return b, nil
}

// newClient is a Web API client for token, on the governed transport, with
// the app token for socket mode.
func (b *Bot) newClient(token string) *slack.Client {
	return slack.New(token,
		slack.OptionAppLevelToken(b.opts.AppToken),
		slack.OptionAPIURL(b.opts.APIURL),
		slack.OptionHTTPClient(b.httpc),
	)
}

// Ready reports whether the bot can serve: at least one socket connected and
// Redis answering (for /readyz).
func (b *Bot) Ready(ctx context.Context) error {
	if b.draining.Load() {
		return errors.New("shutting down")
	}
	if b.sockets.Load() < 1 {
		if why := b.health.why(); why != "" {
			return errors.New("no socket-mode connection: " + why)
		}
		return errors.New("no socket-mode connection")
	}
	if err := b.store.Ping(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Run serves until ctx ends, then shuts down: it stops reading envelopes,
// gives running turns ShutdownGrace to finish (cancelling them halfway
// through so they checkpoint) and returns. It fails early only if Slack
// refuses a token (Authenticate, unless the caller ran it already).
func (b *Bot) Run(ctx context.Context) error {
	if err := b.Authenticate(ctx); err != nil {
		return err
	}

	// Turns run under their own context so shutdown can let them finish.
	turnCtx, cancelTurns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelTurns(errors.New("bot stopped"))

	// Sockets outlive ctx by socketDrain (connections.go).
	sockCtx, stopSockets := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSockets()
	var socks sync.WaitGroup
	for i := range b.opts.SocketConnections {
		socks.Go(func() {
			// Spread connection opens so slack-go's close-then-reopen gaps
			// do not coincide.
			if i > 0 && !pause.Sleep(sockCtx, time.Duration(i)*3*time.Second) {
				return
			}
			b.superviseSocket(sockCtx, turnCtx, i)
		})
	}
	// Turns orphaned by a dead replica (or handed over) resume here.
	socks.Go(func() { b.scanOrphans(ctx, turnCtx) })
	<-ctx.Done()
	b.draining.Store(true)
	b.drainSockets()
	stopSockets()
	socks.Wait()
	b.jobs.Close() // slash command answers and clicks still being worked on

	done := make(chan struct{})
	go func() { b.workers.Wait(); close(done) }()
	half := time.NewTimer(b.opts.ShutdownGrace / 2)
	defer half.Stop()
	// Turns that only wait on people would wait out the grace period:
	// withdraw them at once (waits.go).
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
wait:
	for {
		select {
		case <-done:
			return nil
		case <-half.C:
			b.log.Info("bot: shutdown: cancelling running turns so they checkpoint")
			cancelTurns(errShutdown)
			break wait
		case <-poll.C:
			if what, ok := b.waits.onlyWaiting(); ok {
				b.log.Info("bot: shutdown: running turns wait on people; withdrawing their prompts (asked again after the restart)", "waiting_for", what)
				cancelTurns(errShutdown)
				break wait
			}
		}
	}
	full := time.NewTimer(b.opts.ShutdownGrace / 2)
	defer full.Stop()
	select {
	case <-done:
	case <-full.C:
		b.log.Warn("bot: shutdown grace period over with turns still running")
		<-done // they were cancelled: they end promptly
	}
	return nil
}

// errShutdown is the cause of turns cancelled by a shutdown: they are handed
// over (agent.ErrHandOver), so another replica resumes them and decides
// the calls they had not started.
var errShutdown = fmt.Errorf("bot shutting down: %w", agent.ErrHandOver)

// cmpOr is a when set, else b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
