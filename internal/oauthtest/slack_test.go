package oauthtest_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/internal/oauthtest"
)

type bearer struct {
	tok  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.next.RoundTrip(r)
}

func TestSlackMCPServer(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{Slack: true, RedirectURIs: []string{"https://bot.example/oauth/callback"}})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	get := func(u string) (*http.Response, string) {
		t.Helper()
		resp, err := noFollow.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	// Discovery: 401 names the bare-origin metadata; the path-aware URL
	// answers 302.
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wa := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 401 || !strings.Contains(wa, srv.Issuer+"/.well-known/oauth-protected-resource\"") {
		t.Errorf("unauthenticated: %d %q", resp.StatusCode, wa)
	}
	if r, _ := get(srv.Issuer + "/.well-known/oauth-protected-resource/mcp"); r.StatusCode != http.StatusFound {
		t.Errorf("path-aware discovery: %d, want 302", r.StatusCode)
	}
	r, body := get(srv.Issuer + "/.well-known/oauth-protected-resource")
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if r.StatusCode != 200 || json.Unmarshal([]byte(body), &prm) != nil || prm.Resource != srv.URL || prm.AuthorizationServers[0] != srv.Issuer {
		t.Errorf("bare-origin metadata: %d %s", r.StatusCode, body)
	}
	_, body = get(srv.Issuer + "/.well-known/oauth-authorization-server")
	var asm map[string]any
	_ = json.Unmarshal([]byte(body), &asm)
	if _, has := asm["registration_endpoint"]; has || asm["token_endpoint"] != srv.Issuer+"/api/oauth.v2.user.access" {
		t.Errorf("AS metadata = %v", asm)
	}
	if resp, err := http.Post(srv.Issuer+"/register", "application/json", strings.NewReader(`{"redirect_uris":["https://x"]}`)); err != nil || resp.StatusCode != 404 {
		t.Errorf("registration: %v %v", resp.StatusCode, err)
	}

	// Authorization: explicit scope and PKCE required.
	verifier := "a-verifier-that-is-long-enough-to-be-a-real-pkce-verifier"
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"client_id": {"1111.2222"}, "redirect_uri": {"https://bot.example/oauth/callback"}, "state": {"st"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	if _, err := oauthtest.Authorize(context.Background(), asm["authorization_endpoint"].(string)+"?"+q.Encode(), "U222"); err == nil {
		t.Error("authorize without scope was accepted")
	}
	q.Set("scope", "search:read.public,channels:history")
	got, err := oauthtest.Authorize(context.Background(), asm["authorization_endpoint"].(string)+"?"+q.Encode(), "U222")
	if err != nil || got.Get("state") != "st" {
		t.Fatalf("authorize: %v %v", got, err)
	}
	exchange := func(form url.Values, basic bool) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, srv.Issuer+"/api/oauth.v2.user.access", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth("1111.2222", "canary-client-secret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {got.Get("code")}, "redirect_uri": {"https://bot.example/oauth/callback"}, "code_verifier": {verifier}}
	if out := exchange(form, true); out["ok"] != false {
		t.Errorf("Basic client auth accepted: %v", out)
	}
	// The code survived the refused attempt? No: Slack burns it; get a new one.
	got, _ = oauthtest.Authorize(context.Background(), asm["authorization_endpoint"].(string)+"?"+q.Encode(), "U222")
	form.Set("code", got.Get("code"))
	form.Set("client_id", "1111.2222")
	form.Set("client_secret", "wrong")
	if out := exchange(form, false); out["error"] != "invalid_client_id" {
		t.Errorf("wrong secret: %v", out)
	}
	got, _ = oauthtest.Authorize(context.Background(), asm["authorization_endpoint"].(string)+"?"+q.Encode(), "U222")
	form.Set("code", got.Get("code"))
	form.Set("client_secret", "canary-client-secret")
	out := exchange(form, false)
	tok, _ := out["access_token"].(string)
	if out["ok"] != true || !strings.HasPrefix(tok, "xoxp-canary-") {
		t.Fatalf("token: %v", out)
	}

	// MCP calls carry the person's user token.
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	hc := &http.Client{Transport: bearer{tok, http.DefaultTransport}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "U222" {
		t.Errorf("whoami: %+v %v", res, err)
	}
	_ = sess.Close()

	// The app's MCP toggle off: -32600 on every call, after OAuth.
	srv.SetMCPEnabled(false)
	_, err = cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err == nil || !strings.Contains(err.Error(), "not enabled for Slack MCP server access") {
		t.Errorf("toggle off: %v", err)
	}
	if st := srv.Stats(); st.PathAwareDiscoveries != 1 || st.AuthorizeRefusals != 1 || st.Registrations != 0 {
		t.Errorf("stats = %+v", st)
	}
}
