package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Errors callers branch on. Every error the store returns wraps one of these
// or describes bad input or corrupt data (naming the Redis key).
var (
	// ErrNotFound means the thing asked for does not exist (or expired).
	ErrNotFound = errors.New("session: not found")
	// ErrStaleFence means a write carried a fencing token that is no longer
	// the thread's current one: another replica took the thread over. The
	// writer must stop the turn without further side effects.
	ErrStaleFence = errors.New("session: stale fencing token")
	// ErrLeaseHeld means another owner holds the thread's lease.
	ErrLeaseHeld = errors.New("session: lease held by another owner")
	// ErrLeaseLost means the lease expired or was taken over; the turn must
	// stop.
	ErrLeaseLost = errors.New("session: lease lost")
	// ErrNoSecretKey means an operation needs SECRET_KEY and none is
	// configured (or the record was sealed with a key id that is not known).
	ErrNoSecretKey = errors.New("session: no secret key configured")
	// ErrUnavailable means Redis could not be reached or did not answer in
	// time. The operation may or may not have been applied; callers treat it
	// as "try again later" (the bot does not ack the event).
	ErrUnavailable = errors.New("session: redis unavailable")
	// ErrQueueFull means a thread's pending-message queue is at its bound.
	ErrQueueFull = errors.New("session: thread queue full")
	// ErrTooMany means a per-workspace bound (registrations, pins) is reached.
	ErrTooMany = errors.New("session: too many entries")
	// ErrExists means a create found the name already taken (two admins
	// adding the same server at once: the second one loses).
	ErrExists = errors.New("session: already exists")
	// ErrConflict means a record changed between its read and a write
	// based on that read; read it again and redo the change.
	ErrConflict = errors.New("session: changed concurrently")
)

// IsUnavailable reports whether err means Redis was unreachable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// Options configure a Store. Zero values mean the defaults noted on each field.
type Options struct {
	// URL is a redis:// or rediss:// URL; "" runs an in-process Redis. A
	// URL with a master_name parameter names Sentinels instead
	// (redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379);
	// one with cluster=true names Redis Cluster seed nodes
	// (redis://node1:6379?cluster=true&addr=node2:6379&addr=node3:6379).
	URL string
	// Prefix namespaces every key (default "bobbin"). It must not contain
	// '{' or '}'.
	Prefix string
	// SessionTTL is how long a thread's state lives after its last write
	// (default 30 days).
	SessionTTL time.Duration
	// LeaseTTL is the thread lease lifetime; holders renew every LeaseTTL/3
	// (default 20 s).
	LeaseTTL time.Duration
	// DedupeTTL is how long event and message identities are remembered
	// (default and minimum 24 h).
	DedupeTTL time.Duration
	// ApprovalRetention is how long a decided or expired approval record is
	// kept after its expiry, so late clicks get a precise answer (default
	// 24 h).
	ApprovalRetention time.Duration
	// SecretKey is the 32-byte key-encryption key for registration secrets
	// (see DecodeSecretKey); nil makes operations that need it fail with
	// ErrNoSecretKey.
	SecretKey []byte
	// SecretKeyID names SecretKey in sealed records (default KeyID(SecretKey)).
	SecretKeyID string
	// OldSecretKeys are previous keys by id, used only to open records sealed
	// before a rotation.
	OldSecretKeys map[string][]byte
	// DialTimeout bounds connecting (default 2 s); ReadTimeout and
	// WriteTimeout bound a command (default 3 s).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// Logger receives warnings; nil discards. Secrets are never logged.
	Logger *slog.Logger
}

// Store is the Redis-backed state shared by all replicas. It is safe for
// concurrent use. Close it when done.
type Store struct {
	// rdb is a *redis.Client (one node, or the Sentinel-followed master)
	// or a *redis.ClusterClient.
	rdb redis.UniversalClient
	// waits is a second client whose connections only WaitApproval holds
	// (one per waiter, blocked in BLPOP), so turns waiting for a person
	// never use up rdb's pool. Its type matches rdb's.
	waits redis.UniversalClient
	mini  *miniredis.Miniredis // nil unless embedded
	k     keys
	opt   Options
	log   *slog.Logger
	kek   *keyring
}

// Open connects to Redis (or starts the embedded one) and checks it answers.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.Prefix = cmp.Or(opts.Prefix, "bobbin")
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("session: prefix %q must not contain braces", opts.Prefix)
	}
	opts.SessionTTL = cmp.Or(opts.SessionTTL, 30*24*time.Hour)
	opts.LeaseTTL = cmp.Or(opts.LeaseTTL, 20*time.Second)
	opts.DedupeTTL = max(cmp.Or(opts.DedupeTTL, 24*time.Hour), 24*time.Hour)
	opts.ApprovalRetention = cmp.Or(opts.ApprovalRetention, 24*time.Hour)
	opts.DialTimeout = cmp.Or(opts.DialTimeout, 2*time.Second)
	opts.ReadTimeout = cmp.Or(opts.ReadTimeout, 3*time.Second)
	opts.WriteTimeout = cmp.Or(opts.WriteTimeout, 3*time.Second)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kr, err := newKeyring(opts.SecretKey, opts.SecretKeyID, opts.OldSecretKeys)
	if err != nil {
		return nil, err
	}
	s := &Store{k: keys{prefix: opts.Prefix}, opt: opts, log: log, kek: kr}

	// newClient builds a client for the configured Redis; poolSize 0 keeps
	// the URL's pool_size or go-redis's default.
	var newClient func(poolSize int) redis.UniversalClient
	switch {
	case opts.URL == "":
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true) // keys must expire in real time: leases depend on it
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("session: starting embedded redis: %w", err)
		}
		s.mini = m
		newClient = func(poolSize int) redis.UniversalClient {
			return redis.NewClient(s.clientOptions(&redis.Options{Addr: m.Addr(), PoolSize: cmp.Or(poolSize, embeddedPoolSize)}))
		}
		log.Warn("session: REDIS_URL is empty: using an in-process Redis; state will not survive a restart and only one replica may run")
	case strings.Contains(opts.URL, "master_name="):
		// Sentinel: redis://[user:pass@]sentinel:26379?master_name=M&addr=sentinel2:26379
		fo, err := redis.ParseFailoverURL(opts.URL)
		if err != nil {
			return nil, errors.New("session: REDIS_URL is not a valid Sentinel URL (redis://sentinel:26379?master_name=NAME)")
		}
		ro := s.clientOptions(&redis.Options{})
		fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout = ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout
		fo.MaxRetries, fo.DialerRetries, fo.DialerRetryTimeout = ro.MaxRetries, ro.DialerRetries, ro.DialerRetryTimeout
		fo.ContextTimeoutEnabled, fo.DisableIdentity = true, true
		fo.ReadBufferSize, fo.WriteBufferSize, fo.PipelinePoolSize = ro.ReadBufferSize, ro.WriteBufferSize, ro.PipelinePoolSize
		newClient = func(poolSize int) redis.UniversalClient {
			o := *fo
			o.PoolSize = cmp.Or(poolSize, o.PoolSize)
			return redis.NewFailoverClient(&o)
		}
	case isClusterURL(opts.URL):
		co, err := parseClusterURL(opts.URL)
		if err != nil {
			return nil, err
		}
		ro := s.clientOptions(&redis.Options{})
		co.DialTimeout, co.ReadTimeout, co.WriteTimeout = ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout
		co.DialerRetries, co.DialerRetryTimeout = ro.DialerRetries, ro.DialerRetryTimeout
		co.ContextTimeoutEnabled, co.DisableIdentity = true, true
		co.ReadBufferSize, co.WriteBufferSize, co.PipelinePoolSize = ro.ReadBufferSize, ro.WriteBufferSize, ro.PipelinePoolSize
		co.MaintNotificationsConfig = ro.MaintNotificationsConfig
		// MOVED/ASK redirects during a resharding or failover are followed;
		// a command is retried once more than on one node because a
		// failover shows up as a refused connection to the old primary.
		co.MaxRetries = 2
		newClient = func(poolSize int) redis.UniversalClient {
			o := *co
			o.PoolSize = cmp.Or(poolSize, o.PoolSize)
			return redis.NewClusterClient(&o)
		}
	default:
		ro, err := redis.ParseURL(opts.URL)
		if err != nil {
			// url.Parse errors quote the URL, password included: say less.
			return nil, errors.New("session: REDIS_URL is not a valid redis:// or rediss:// URL")
		}
		s.clientOptions(ro)
		newClient = func(poolSize int) redis.UniversalClient {
			o := *ro
			o.PoolSize = cmp.Or(poolSize, o.PoolSize)
			return redis.NewClient(&o)
		}
	}
	s.rdb = newClient(0)
	s.waits = newClient(maxWaiters)
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// clientOptions applies the store's timeouts and retry policy.
func (s *Store) clientOptions(ro *redis.Options) *redis.Options {
	ro.DialTimeout = s.opt.DialTimeout
	ro.ReadTimeout = s.opt.ReadTimeout
	ro.WriteTimeout = s.opt.WriteTimeout
	ro.MaxRetries = 1
	ro.DialerRetries = 2 // fail fast when Redis is down: the caller retries (Slack redelivers)
	ro.DialerRetryTimeout = 50 * time.Millisecond
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true // CLIENT SETINFO is noise on old servers and miniredis
	// Maintenance notifications are a managed-Redis feature we do not use.
	// In "auto" mode go-redis v9.23 tries the handshake on every new
	// connection and, on servers without it (Redis < 8, miniredis), rewrites
	// the shared *Options under a per-Conn lock: a data race between the
	// dedicated connections WaitApproval takes from s.waits.
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// Bounded buffers: go-redis gives each connection 32 KiB + 32 KiB and
	// each connection of its separate pipeline pool 128 KiB + 128 KiB, most
	// of a busy replica's Redis memory (issue 23); our commands and
	// pipelines are small, and a large transcript only costs a few more
	// reads.
	ro.ReadBufferSize, ro.WriteBufferSize = connBuffer, connBuffer
	ro.PipelinePoolSize = -1 // pipelines share the main pool
	return ro
}

// embeddedPoolSize bounds the connections to the embedded Redis: it runs
// one command at a time under one lock, so more connections would only
// queue there instead of in the pool, and each costs a server goroutine
// and both ends' buffers (10 concurrent turns opened about 20). Blocking
// commands (BLPOP) use the waits client, never this pool.
const embeddedPoolSize = 2

// connBuffer is each Redis connection's read and write buffer.
const connBuffer = 8 << 10

// maxWaiters bounds the connections of concurrent WaitApproval calls; they
// are dialled only as waiters need them.
const maxWaiters = 1024

// Close releases the connections and stops the embedded Redis, if any.
func (s *Store) Close() error {
	err := errors.Join(s.rdb.Close(), s.waits.Close())
	if s.mini != nil {
		s.mini.Close()
	}
	return err
}

// Ping checks that Redis answers (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return s.wrap("ping", err)
	}
	return nil
}

// wrap turns a go-redis error into a store error, marking connectivity
// failures with ErrUnavailable.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("session: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("session: %s: %w", op, err)
}

func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "READONLY") ||
		strings.HasPrefix(msg, "MASTERDOWN") || strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN")
}
