package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/agent/servers"
)

// OAuth for HTTP MCP servers (issue 13), on go-sdk's oauthex pieces and
// golang.org/x/oauth2.
//
// Why not go-sdk's auth.AuthorizationCodeHandler as a whole: it runs the
// entire browser flow inside Authorize, blocking in its code fetcher, and
// keeps the PKCE verifier in a local variable of that call. Bobbin runs
// several replicas behind one PUBLIC_URL: the person's browser may bring the
// callback to any replica, and the replica that made the link may have
// restarted by then. So the flow is split at the redirect: StartConnect does
// discovery (oauthex.GetProtectedResourceMetadata, auth.GetAuthServerMetadata),
// client registration (pre-registered → CIMD → oauthex.RegisterClient, the
// spec's order; go-sdk's differs) and builds the authorization URL with
// oauth2.Config.AuthCodeURL, S256 and resource; the state, the verifier
// and everything the exchange needs are bound in shared storage (sealed,
// single use, 10 minutes). CompleteCallback, on whichever replica the
// browser reaches, takes that binding, checks iss (RFC 9207), redeems the
// code with oauth2.Config.Exchange, stores the sealed token and wakes the
// waiting turn through the ConnectWaker. The transport then uses our
// auth.OAuthHandler (oauthHandler), which serves stored tokens, refreshes
// them under a cross-replica lock, and turns a 401/403 it cannot fix by
// refreshing into a NeedsConnectError that the call layer answers by
// asking the person to connect (the human wait happens outside the
// transport, so the probe and call timeouts stay short).

// Auth modes of a server.
const (
	// AuthNone sends only static headers (the default).
	AuthNone = "none"
	// AuthWorkspace: an admin connects once; every call in the workspace
	// uses that connection.
	AuthWorkspace = "workspace"
	// AuthUser: each person connects their own account; a call uses the
	// requester's connection and acts as them.
	AuthUser = "user"
)

func validAuthMode(m string) bool {
	switch m {
	case "", AuthNone, AuthWorkspace, AuthUser:
		return true
	}
	return false
}

// TokenStore keeps OAuth connections (tokens) and dynamically registered
// clients, sealed at rest. Records are opaque JSON; principal is a Slack
// user id, or "" for the workspace's connection. Absent records are nil
// with no error. *session.Store implements it.
type TokenStore interface {
	OAuthConnection(ctx context.Context, team, server, principal string) ([]byte, error)
	PutOAuthConnection(ctx context.Context, team, server, principal string, rec []byte) error
	DeleteOAuthConnection(ctx context.Context, team, server, principal string) error
	OAuthClient(ctx context.Context, team, issuer string) ([]byte, error)
	PutOAuthClient(ctx context.Context, team, issuer string, rec []byte) error
}

// StateStore keeps pending authorizations under their random state,
// sealed, for ttl, and hands each out exactly once across all replicas
// (unknown, used and expired states are "", nil, nil). *session.Store
// implements it.
type StateStore interface {
	PutOAuthState(ctx context.Context, state, team string, rec []byte, ttl time.Duration) error
	TakeOAuthState(ctx context.Context, state string) (team string, rec []byte, err error)
}

// RefreshLocker serialises refreshes of one connection across replicas, so
// a rotating refresh token is spent once. *session.Store implements it.
type RefreshLocker interface {
	LockOAuth(ctx context.Context, team, server, principal string, ttl time.Duration) (unlock func(), err error)
}

// PromptClaimer keeps Connect prompts to one across replicas: the replica
// that claims (team, server, principal) asks the person; the others' turns
// needing the same connection only wait for it. *session.Store implements
// it.
type PromptClaimer interface {
	ClaimOAuthPrompt(ctx context.Context, team, server, principal string, ttl time.Duration) (release func(), claimed bool, err error)
}

// ConnectWaker wakes turns waiting for a connection, on any replica.
// WaitOAuth blocks until a NotifyOAuth made after it started, or ctx ends.
// *session.Store implements it.
type ConnectWaker interface {
	NotifyOAuth(ctx context.Context, team, server, principal, outcome string) error
	WaitOAuth(ctx context.Context, team, server, principal string) (string, error)
}

// ConnectPrompt asks one person to connect an account (or, for a
// workspace server, an admin to connect the workspace).
type ConnectPrompt struct {
	Caller access.Caller
	Server string
	// Mode is AuthUser or AuthWorkspace.
	Mode string
	// URL is the authorization server's authorization endpoint with state,
	// PKCE and resource: the Connect button's url. Never post it where
	// someone else can click it.
	URL string
	// Reason says why: "not connected", "reconnect needed" or "more
	// permissions needed".
	Reason string
	// Expires is when the link stops working.
	Expires time.Time
}

// ConnectPrompter shows a Connect prompt. The bot implements it with an
// ephemeral message to the requester; it returns once the prompt is shown
// (or with an error, e.g. when a workspace server needs an admin and the
// requester is not one). The Manager then waits for the connection (any
// replica's callback wakes it) until ctx ends (Stop) or
// OAuthOptions.ConnectTimeout passes.
type ConnectPrompter interface {
	PromptConnect(ctx context.Context, p ConnectPrompt) error
}

// AuditEvent is one OAuth event for the audit stream (no secrets).
type AuditEvent struct {
	Team, Server string
	// User is the person concerned; Principal is "" for the workspace's
	// connection.
	User, Principal string
	// Action is "oauth_connect", "oauth_disconnect", "oauth_refresh_failed"
	// or "oauth_connect_failed".
	Action string
	Detail string
}

// OAuthOptions wires OAuth. Without PublicURL, OAuth servers are refused.
type OAuthOptions struct {
	// PublicURL is the externally reachable base URL of the bot's HTTP
	// server (PUBLIC_URL); the redirect URI is PublicURL/oauth/callback
	// and the Client ID Metadata Document is PublicURL/oauth/client-metadata.json.
	PublicURL string
	// ClientMetadataURL overrides the CIMD URL (tests; it must be https).
	ClientMetadataURL string
	// ClientName is shown by authorization servers ["Bobbin"].
	ClientName string
	Tokens     TokenStore
	States     StateStore
	Locker     RefreshLocker
	Waker      ConnectWaker
	Prompter   ConnectPrompter
	// Prompts de-duplicates Connect prompts across replicas (nil: per
	// replica only).
	Prompts PromptClaimer
	Audit   func(ctx context.Context, e AuditEvent)
	// ConnectTimeout bounds waiting for a person to connect [10m];
	// StateTTL is how long a Connect link works [10m].
	ConnectTimeout, StateTTL time.Duration
	// MaxStepUps bounds re-authorizations for more scope per connection
	// [3].
	MaxStepUps int
}

// RedirectURL is the OAuth redirect URI, "" without a PublicURL.
func (o OAuthOptions) RedirectURL() string {
	if o.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(o.PublicURL, "/") + CallbackPath
}

// MetadataURL is the Client ID Metadata Document URL ("" unless https).
func (o OAuthOptions) MetadataURL() string {
	if o.ClientMetadataURL != "" {
		return o.ClientMetadataURL
	}
	if u, err := url.Parse(o.PublicURL); err != nil || u.Scheme != "https" || o.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(o.PublicURL, "/") + ClientMetadataPath
}

// HTTP paths the bot serves under PUBLIC_URL.
const (
	CallbackPath       = "/oauth/callback"
	ClientMetadataPath = "/oauth/client-metadata.json"
)

// Errors callers branch on.
var (
	// ErrBadState: the callback's state is unknown, used, expired or for
	// another workspace.
	ErrBadState = errors.New("mcp: this authorization link has expired or was already used; start Connect again")
)

// NeedsConnectError says a server refused our token (or we have none) and a
// person must (re)connect. Challenge holds the server's WWW-Authenticate
// values, used for discovery and scopes.
type NeedsConnectError struct {
	Server    string
	Reason    string
	Challenge []string
	// StepUp is set for 403 insufficient_scope.
	StepUp bool
}

func (e *NeedsConnectError) Error() string {
	return fmt.Sprintf("%s: %s", e.Server, e.Reason)
}

func (e *NeedsConnectError) Is(target error) bool { return target == servers.ErrNotConnected }

// connKey names one connection.
type connKey struct{ team, server, principal string }

func (k connKey) String() string { return k.team + "/" + k.server + "/" + k.principal }
