package slackemu

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configures a Server. The zero value gives the default workspaces
// (DefaultTeams), Slack's real timings and default rate limits.
type Options struct {
	// Teams are the workspaces. Nil means DefaultTeams().
	Teams []Team
	// AppID is the app's id (default "A111"); AppToken its xapp- token
	// (default "xapp-1-A111-emu").
	AppID    string
	AppToken string

	// TimeScale multiplies Slack's built-in long durations: rate-limit
	// windows, the events_api redelivery schedule, stream lifetime, trigger
	// and response_url expiry, the close after a "warning" disconnect.
	// 0 means 1 (real Slack timing); 0.01 makes a minute 600 ms.
	TimeScale float64

	// AckDeadline is how long an envelope may stay unacked (default 3 s).
	AckDeadline time.Duration
	// RetryDelays are the waits before each events_api redelivery, counted
	// from the missed deadline; its length is the number of retries.
	// Nil means {0, 1 min, 5 min} × TimeScale (three retries).
	RetryDelays []time.Duration
	// PingInterval is the server WebSocket PING period (default 5 s).
	PingInterval time.Duration
	// MaxSockets is the socket limit per app (default 10); the next one
	// gets disconnect too_many_websockets.
	MaxSockets int
	// WarningGrace is how long after a "warning" disconnect the server
	// closes the socket itself (default 10 s × TimeScale). Other reasons
	// close after 1 s if the client has not closed first.
	WarningGrace time.Duration
	// TicketTTL is how long an apps.connections.open URL stays usable
	// (default 30 s).
	TicketTTL time.Duration

	// StreamLifetime is how long after chat.startStream a stream accepts
	// appends (default 5 min × TimeScale).
	StreamLifetime time.Duration
	// ProcessingTimeout is how long an agent session stays "processing"
	// without a new setStatus before Slack makes it "active" (default
	// 1 h × TimeScale).
	ProcessingTimeout time.Duration
	// NoAgentStopSubscription makes agents.sessions.setStatus warn
	// missing_agent_session_stopped_event_subscription, as for an app not
	// subscribed to agent_session_stopped.
	NoAgentStopSubscription bool
	// AgentView is an app with features.agent_view: suggested prompts are
	// tab-level (assistant.threads.setSuggestedPrompts with thread_ts
	// silently does nothing; at most 4 prompts).
	AgentView bool
	// ActionTokenTTL is how long an event's action_token is accepted by
	// assistant.search.context (default 5 min × TimeScale; Slack says
	// "short-lived").
	ActionTokenTTL time.Duration

	// TriggerTTL is a trigger_id's life (default 3 s × TimeScale).
	TriggerTTL time.Duration
	// ResponseURLTTL is a response_url's life (default 30 min × TimeScale);
	// each one takes at most five uses.
	ResponseURLTTL time.Duration

	// RateLimits overrides the built-in limit of a method (key: method
	// name, e.g. "chat.update"). See DefaultRateLimits and MoreRateLimits.
	RateLimits map[string]RateLimit
	// NoRateLimits turns every rate limit off.
	NoRateLimits bool

	// MessageEventsOnMention also delivers a "message" event (as the
	// message.channels subscription does) for a Mention in a channel the bot
	// is a member of, in addition to app_mention. Real Slack does this.
	MessageEventsOnMention bool
	// EchoBotMessages delivers "message" events for the bot's own posts
	// (with bot_id, bot_profile) and message_changed for its edits, in
	// channels the bot is in and DMs, as a subscribed real app would see.
	EchoBotMessages bool

	// AckDropRate makes the server ignore that fraction of acks (0..1), as
	// if they were lost on the way; the envelopes then time out.
	AckDropRate float64
	// KeepLargeAcks accepts acks of 20 KiB or more; by default they are
	// dropped, as Slack is reported to do.
	KeepLargeAcks bool

	// OAuth configures the app's distribution settings for the OAuth v2
	// install flow: client credentials, Redirect URLs, token rotation.
	OAuth OAuthOptions
	// NonMarketplace applies the limits Slack sets for commercially
	// distributed apps outside the Marketplace: conversations.replies at
	// 1 call a minute per workspace (Slack time) and at most 15 messages a
	// page. It applies even with NoRateLimits. See SetNonMarketplace.
	NonMarketplace bool
	// HomeTabDisabled makes views.publish answer not_enabled, as for an
	// app whose App Home tab is off.
	HomeTabDisabled bool
	// Shortcuts are the app's configured shortcuts; MessageShortcut and
	// GlobalShortcut refuse other callback ids. Nil accepts any.
	Shortcuts []Shortcut

	// JournalLimit caps the journal, the ack log, the file download log,
	// the settled (acked or failed) envelopes, failures, closed
	// connections, assistant statuses, each person's ephemeral messages,
	// closed views and the envelopes parked while no socket is open
	// (entries each; the oldest are dropped, parked envelopes fail with
	// "no_socket"). 0 keeps everything.
	JournalLimit int
	// MessageLimit caps the messages kept per channel (top-level and
	// replies together; the oldest are forgotten). 0 keeps all.
	MessageLimit int
	// VersionLimit caps the versions kept in a message's History (its
	// first version and the newest ones) and its stream chunks. 0 keeps
	// all.
	VersionLimit int
	// FileBytesLimit caps the bytes of file contents kept (default
	// 256 MiB); past it the oldest files lose their bytes and their URLs
	// answer 404. A single file larger than the cap is refused.
	FileBytesLimit int64

	// Seed seeds socket choice and ack loss (0 = random).
	Seed uint64
	// Logger receives debug logs (nil = discard). Tokens are never logged.
	Logger *slog.Logger
}

// Team is a workspace.
type Team struct {
	ID     string // "T…"
	Name   string
	Domain string
	// The bot's identity in this workspace, as auth.test reports it.
	BotUserID string
	BotID     string
	BotName   string
	BotToken  string // "xoxb-…": a pinned installation; "" = not installed
	// Scopes are the pinned bot token's scopes; nil grants every scope.
	Scopes []string
	// EnterpriseID / EnterpriseName place the workspace in an Enterprise
	// Grid org ("E…"); "" outside Grid.
	EnterpriseID   string
	EnterpriseName string
	Users          []User
	Channels       []Channel
}

// User is a person (or bot) visible to users.info.
type User struct {
	ID                string
	TeamID            string // may differ from the workspace (strangers)
	Name              string
	RealName          string
	DisplayName       string
	IsAdmin           bool
	IsOwner           bool
	IsPrimaryOwner    bool
	IsRestricted      bool // guest
	IsUltraRestricted bool // single-channel guest
	IsStranger        bool // external, from a shared channel
	IsBot             bool
	Deleted           bool
	// EnterpriseID is the user's Grid org: users.info then carries
	// enterprise_user.
	EnterpriseID string
}

// Channel is a conversation: a public channel ("C…"), private channel
// (Private) or a DM ("D…", IMUser set).
type Channel struct {
	ID        string
	Name      string
	Private   bool
	IMUser    string // for a DM: the human on the other side
	BotMember bool   // the bot is in the channel (DMs: always)
	// Members are the people in the channel, for what each may see
	// (assistant.search.context): a private channel is visible to its
	// members only; a public one to every full member of its workspace
	// and to the guests listed here.
	Members []string
	// SharedTeams makes it a Slack Connect channel: these other workspaces
	// share it (same id), and their tokens may use it.
	SharedTeams []string
}

// IsIM reports whether the channel is a direct message.
func (c Channel) IsIM() bool { return c.IMUser != "" || strings.HasPrefix(c.ID, "D") }

// IDs of DefaultTeams, for tests.
const (
	TeamID        = "T111"
	TeamID2       = "T222"
	BotUserID     = "U0BOT"
	BotID         = "B0BOT"
	BotToken      = "xoxb-111-emu-bot"
	BotToken2     = "xoxb-222-emu-bot"
	AppID         = "A111"
	AppToken      = "xapp-1-A111-emu"
	UserAlice     = "U222"     // ordinary member of T111
	UserBob       = "U333"     // ordinary member of T111
	UserAdmin     = "UADMIN"   // workspace admin of T111
	UserOwner     = "UOWNER"   // primary owner of T111
	UserGuest     = "UGUEST"   // multi-channel guest (restricted)
	UserSingle    = "USINGLE"  // single-channel guest (ultra restricted)
	UserStranger  = "USTRANGE" // external user from T999
	UserDeleted   = "UDELETED" // deactivated
	UserOtherBot  = "UOTHERBOT"
	UserT2        = "U2ALICE" // ordinary member of T222
	ChannelGen    = "C111"    // #general in T111, bot is a member
	ChannelRandom = "C222"    // #random in T111, bot is not a member
	DMAlice       = "D111"    // DM between the bot and alice
	DMBob         = "D333"    // DM between the bot and bob
	ChannelT2     = "C2GEN"   // #general in T222, bot is a member
)

// DefaultTeams returns two workspaces: T111 with a cast of users covering
// every permission flag, and T222 for cross-workspace tests. See the
// constants (TeamID, UserAlice, ChannelGen, …) for their ids.
func DefaultTeams() []Team {
	return []Team{
		{
			ID: TeamID, Name: "Acme", Domain: "acme",
			BotUserID: BotUserID, BotID: BotID, BotName: "bobbin", BotToken: BotToken,
			Users: []User{
				{ID: UserAlice, Name: "alice", RealName: "Alice Archer", DisplayName: "alice"},
				{ID: UserBob, Name: "bob", RealName: "Bob Baker", DisplayName: "bob"},
				{ID: UserAdmin, Name: "carol", RealName: "Carol Admin", DisplayName: "carol", IsAdmin: true},
				{ID: UserOwner, Name: "dave", RealName: "Dave Owner", DisplayName: "dave", IsAdmin: true, IsOwner: true, IsPrimaryOwner: true},
				{ID: UserGuest, Name: "erin", RealName: "Erin Guest", DisplayName: "erin", IsRestricted: true},
				{ID: UserSingle, Name: "frank", RealName: "Frank Single", DisplayName: "frank", IsRestricted: true, IsUltraRestricted: true},
				{ID: UserStranger, TeamID: "T999", Name: "gina", RealName: "Gina Stranger", DisplayName: "gina", IsStranger: true},
				{ID: UserDeleted, Name: "hank", RealName: "Hank Gone", DisplayName: "hank", Deleted: true},
				{ID: UserOtherBot, Name: "otherbot", RealName: "Other Bot", DisplayName: "otherbot", IsBot: true},
			},
			Channels: []Channel{
				{ID: ChannelGen, Name: "general", BotMember: true},
				{ID: ChannelRandom, Name: "random"},
				{ID: DMAlice, IMUser: UserAlice},
				{ID: DMBob, IMUser: UserBob},
			},
		},
		{
			ID: TeamID2, Name: "Globex", Domain: "globex",
			BotUserID: "U0BOT2", BotID: "B0BOT2", BotName: "bobbin", BotToken: BotToken2,
			Users: []User{
				{ID: UserT2, Name: "alice2", RealName: "Alice Two", DisplayName: "alice2"},
			},
			Channels: []Channel{
				{ID: ChannelT2, Name: "general", BotMember: true},
			},
		},
	}
}

// Server is a running emulator. All methods are safe for concurrent use.
type Server struct {
	opts  Options
	log   *slog.Logger
	ln    net.Listener
	http  *http.Server
	base  string // "http://127.0.0.1:PORT"
	serve chan struct{}

	mu     sync.Mutex
	closed bool
	rng    *rand.Rand
	tasks  sync.WaitGroup // timer callbacks in flight
	timers map[*time.Timer]struct{}
	cond   chan struct{} // closed and replaced on every state change

	teams    map[string]*teamState
	tokens   map[string]*tokenState
	rosters  map[string]map[string]bool // team → users added to it
	users    map[string]*User
	channels map[string]*channelState

	lastTS  int64 // microseconds of the last issued ts
	idSeq   uint64
	journal []Call
	faults  map[string][]*Fault
	buckets map[string]*bucket
	limited map[string]int // 429s per method

	msgs       map[string]*Message // key channel+"/"+ts
	order      map[string][]*Message
	ephemerals map[string][]*Ephemeral // by user
	statuses   []AssistantStatus

	triggers  map[string]*trigger
	views     map[string]*View   // by view id
	stacks    map[string][]*View // by team/user
	responses map[string]*responseURL

	tickets   map[string]time.Time
	conns     map[string]*conn
	connSeq   int
	envelopes map[string]*Envelope
	envOrder  []*Envelope
	pending   []*Envelope // waiting for a socket
	failures  []Failure
	acks      []AckRecord
	badFrames int
	inter     map[string]*interaction
	methods   map[string]handlerFunc
	connLog   []ConnInfo // closed connections
	connStats ConnStats
	revoked   map[string]bool
	defaults  map[string]RateLimit

	installs   []*install
	refreshes  map[string]*refreshToken
	codes      map[string]*oauthCode
	consent    Consent
	usergroups map[string]*Usergroup
	freePlan   map[string]bool

	files     map[string]*fileState
	fileOrder []*fileState
	fileBytes int64
	downloads []Download
	homes     map[string]*View // published home views by team/user
	uploads   map[string]*pendingUpload
	callSeq   uint64 // last Call.Seq
	issued    int    // credentials issued, for the periodic sweep (retention.go)

	agent  *agentState  // agents.go
	search *searchState // search.go
}

type teamState struct {
	Team
}

type channelState struct {
	Channel
	team string
}

// New starts a Server on a fresh 127.0.0.1 port. It panics if it cannot
// listen (tests cannot continue anyway); call Close when done.
func New(opts Options) *Server {
	opts.TimeScale = cmp.Or(opts.TimeScale, 1)
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * opts.TimeScale) }
	opts.AppID = cmp.Or(opts.AppID, AppID)
	opts.AppToken = cmp.Or(opts.AppToken, AppToken)
	opts.AckDeadline = cmp.Or(opts.AckDeadline, 3*time.Second)
	if opts.RetryDelays == nil {
		opts.RetryDelays = []time.Duration{0, scale(time.Minute), scale(5 * time.Minute)}
	}
	opts.PingInterval = cmp.Or(opts.PingInterval, 5*time.Second)
	opts.MaxSockets = cmp.Or(opts.MaxSockets, 10)
	opts.WarningGrace = cmp.Or(opts.WarningGrace, scale(10*time.Second))
	opts.TicketTTL = cmp.Or(opts.TicketTTL, 30*time.Second)
	opts.StreamLifetime = cmp.Or(opts.StreamLifetime, scale(5*time.Minute))
	opts.TriggerTTL = cmp.Or(opts.TriggerTTL, scale(3*time.Second))
	opts.ActionTokenTTL = cmp.Or(opts.ActionTokenTTL, scale(5*time.Minute))
	opts.ResponseURLTTL = cmp.Or(opts.ResponseURLTTL, scale(30*time.Minute))
	if opts.Teams == nil {
		opts.Teams = DefaultTeams()
	}
	opts.RateLimits = maps.Clone(opts.RateLimits) // SetRateLimit writes it
	opts.OAuth = opts.OAuth.withDefaults(scale)
	opts.FileBytesLimit = cmp.Or(opts.FileBytesLimit, 256<<20)
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	s := &Server{
		opts:       opts,
		log:        log,
		serve:      make(chan struct{}),
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		timers:     map[*time.Timer]struct{}{},
		cond:       make(chan struct{}),
		teams:      map[string]*teamState{},
		tokens:     map[string]*tokenState{},
		rosters:    map[string]map[string]bool{},
		users:      map[string]*User{},
		channels:   map[string]*channelState{},
		faults:     map[string][]*Fault{},
		buckets:    map[string]*bucket{},
		limited:    map[string]int{},
		msgs:       map[string]*Message{},
		order:      map[string][]*Message{},
		ephemerals: map[string][]*Ephemeral{},
		triggers:   map[string]*trigger{},
		views:      map[string]*View{},
		stacks:     map[string][]*View{},
		responses:  map[string]*responseURL{},
		tickets:    map[string]time.Time{},
		conns:      map[string]*conn{},
		envelopes:  map[string]*Envelope{},
		methods:    methodTable(),
		defaults:   DefaultRateLimits(),
		refreshes:  map[string]*refreshToken{},
		codes:      map[string]*oauthCode{},
		usergroups: map[string]*Usergroup{},
		freePlan:   map[string]bool{},
		files:      map[string]*fileState{},
		homes:      map[string]*View{},
		uploads:    map[string]*pendingUpload{},
	}
	for m, l := range MoreRateLimits() {
		if _, ok := s.defaults[m]; !ok {
			s.defaults[m] = l
		}
	}
	for _, t := range opts.Teams {
		s.AddTeam(t)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("slackemu: listen: %v", err))
	}
	s.ln = ln
	s.base = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.handleAPI)
	mux.HandleFunc("/link/", s.handleLink)
	mux.HandleFunc("/hooks/", s.handleResponseURL)
	mux.HandleFunc("GET /oauth/v2/authorize", s.handleAuthorize)
	mux.HandleFunc("GET /files-pri/", s.handleFile)
	mux.HandleFunc("GET /files-tmb/", s.handleFile)
	mux.HandleFunc("GET /{$}", s.handleSignIn)
	mux.HandleFunc("POST /upload/v1/", s.handleUpload)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.serve)
		_ = s.http.Serve(ln)
	}()
	return s
}

// APIURL is the Web API base, ending in "/api/" (for slack.OptionAPIURL and
// SLACK_API_URL).
func (s *Server) APIURL() string { return s.base + "/api/" }

// URL is the server's base URL, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.base }

// Close closes every socket, stops the listener and waits for the server's
// goroutines and timers to finish. It is safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for t := range s.timers {
		if t.Stop() {
			s.tasks.Done()
		}
	}
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	_ = s.http.Close()
	<-s.serve
	for _, c := range conns {
		c.kill()
	}
	for _, c := range conns {
		c.wait()
	}
	s.tasks.Wait()
}

// AddTeam adds (or replaces) a workspace with its users and channels.
func (s *Server) AddTeam(t Team) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := &teamState{Team: t}
	ts.Users, ts.Channels = nil, nil
	if old := s.teams[t.ID]; old != nil && old.BotToken != "" && old.BotToken != t.BotToken {
		delete(s.tokens, old.BotToken)
	}
	s.teams[t.ID] = ts
	if t.BotToken != "" {
		s.pinInstallLocked(ts)
	}
	for _, u := range t.Users {
		s.addUserLocked(t.ID, u)
	}
	if t.BotUserID != "" {
		s.addUserLocked(t.ID, User{ID: t.BotUserID, Name: t.BotName, RealName: t.BotName, DisplayName: t.BotName, IsBot: true})
	}
	for _, c := range t.Channels {
		s.channels[c.ID] = &channelState{Channel: c, team: t.ID}
	}
	s.changedLocked()
}

// AddUser adds (or replaces) a user of team.
func (s *Server) AddUser(team string, u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addUserLocked(team, u)
}

func (s *Server) addUserLocked(team string, u User) {
	if u.TeamID == "" {
		u.TeamID = team
	}
	s.users[u.ID] = &u
	if s.rosters[team] == nil {
		s.rosters[team] = map[string]bool{}
	}
	s.rosters[team][u.ID] = true
}

// AddChannel adds (or replaces) a channel of team.
func (s *Server) AddChannel(team string, c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = &channelState{Channel: c, team: team}
}

// SetBotMember puts the bot into (or out of) a channel.
func (s *Server) SetBotMember(channel string, member bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.channels[channel]; c != nil {
		c.BotMember = member
	}
}

// RevokeToken makes a bot or app token answer token_revoked from now on.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revoked == nil {
		s.revoked = map[string]bool{}
	}
	s.revoked[token] = true
}

// SetAckDropRate changes Options.AckDropRate at run time (0 stops losing
// acks).
func (s *Server) SetAckDropRate(rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.AckDropRate = rate
}

// SetMaxSockets changes Options.MaxSockets at run time; sockets already
// open stay open, new ones beyond the limit get too_many_websockets.
func (s *Server) SetMaxSockets(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.MaxSockets = n
}

// WaitFor polls cond (every 5 ms, and at every state change) until it
// returns true or ctx ends; it returns ctx's error in that case. cond is
// called without the server's lock, so it may call query methods.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.cond
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("slackemu: WaitFor: %w", context.Cause(ctx))
		case <-ch:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// changedLocked wakes WaitFor callers.
func (s *Server) changedLocked() {
	close(s.cond)
	s.cond = make(chan struct{})
}

// after runs fn after d on a timer owned by the server (Close stops it and
// waits for a running one). fn runs without the lock.
func (s *Server) afterLocked(d time.Duration, fn func()) {
	if s.closed {
		return
	}
	s.tasks.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer s.tasks.Done()
		s.mu.Lock()
		delete(s.timers, t)
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			fn()
		}
	})
	s.timers[t] = struct{}{}
}

// newTSLocked issues a message timestamp "%d.%06d", strictly increasing.
func (s *Server) newTSLocked() string {
	now := time.Now().UnixMicro()
	if now <= s.lastTS {
		now = s.lastTS + 1
	}
	s.lastTS = now
	return fmt.Sprintf("%d.%06d", now/1e6, now%1e6)
}

// newIDLocked returns prefix + a short unique uppercase id. The random
// part has a million values, not a thousand: whole-program tests run one
// emulator each against one Redis, and the bot dedupes events by id there
// (a collision dropped a test's mention as a duplicate).
func (s *Server) newIDLocked(prefix string) string {
	s.idSeq++
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	n := s.idSeq*7919 + s.rng.Uint64N(1_000_000)*1_000_003
	var b []byte
	for range 9 {
		b = append(b, digits[n%36])
		n /= 36
	}
	return fmt.Sprintf("%s%s%d", prefix, b, s.idSeq)
}

// newUUIDLocked returns a random version-4 UUID.
func (s *Server) newUUIDLocked() string {
	var b [16]byte
	for i := range 2 {
		v := s.rng.Uint64()
		for j := range 8 {
			b[i*8+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
