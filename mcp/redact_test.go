package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"https://mcp.example.com/mcp?key=s3cret&x=1", "https://mcp.example.com/mcp?…"},
		{"https://user:pass@mcp.example.com:8443/a/b?token=t#frag", "https://mcp.example.com:8443/a/b?…"},
		{"https://tok@mcp.example.com/", "https://mcp.example.com/"},
		{"http://127.0.0.1:9/mcp?", "http://127.0.0.1:9/mcp?…"},
		{"https://mcp.example.com/mcp#x", "https://mcp.example.com/mcp"},
		{"not a url ?key=1", "not a url "},
		{"https://u:p@host name/x?k=1", "https://host name/x"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactErr(t *testing.T) {
	base := &url.Error{Op: "Post", URL: "https://u:p@mcp.example.com/mcp?key=canary1", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"no url", errors.New("plain failure"), "plain failure"},
		{"url.Error", base, `Post "https://mcp.example.com/mcp?…": connection refused`},
		{"wrapped twice", fmt.Errorf("connect: %w", fmt.Errorf("sse at https://h/sse?token=canary2, then https://h/m?sessionId=canary3: %w", base)),
			`connect: sse at https://h/sse?…, then https://h/m?…: Post "https://mcp.example.com/mcp?…": connection refused`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redactErr(tc.err)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("redactErr(nil) = %v", got)
				}
				return
			}
			if got.Error() != tc.want {
				t.Errorf("redactErr(%q) = %q, want %q", tc.err, got, tc.want)
			}
			if strings.Contains(got.Error(), "canary") || strings.Contains(got.Error(), "u:p@") {
				t.Errorf("redactErr(%q) = %q still holds a secret", tc.err, got)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("redactErr lost the error chain of %q", tc.err)
			}
		})
	}
}

// TestHTTPServerURLNeverShown: a server URL with a key in its query that
// fails to connect (refused, or an HTTP error) shows up in errors, status
// and logs without the key.
func TestHTTPServerURLNeverShown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closedPort, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(denied.Close)
	_, deniedPort, _ := net.SplitHostPort(strings.TrimPrefix(denied.URL, "http://"))

	for _, port := range []string{closedPort, deniedPort} {
		t.Run(port, func(t *testing.T) {
			raw := "http://docs.test:" + port + "/mcp?key=canary-" + port
			cfg := &Config{Servers: []ServerConfig{{Name: "docs", URL: raw}}}
			m := newTestManager(t, cfg, func(o *Options) { o.AllowPrivateNetworks = true })
			_, perr := m.Probe(context.Background(), "reg", raw, nil)
			if perr == nil {
				t.Fatal("Probe succeeded against a failing server")
			}
			if _, err := m.Tools(context.Background(), "T1"); err != nil {
				t.Fatal(err)
			}
			st := statusOf(t, m.Manager, "T1", "docs")
			for what, s := range map[string]string{"probe error": perr.Error(), "status url": st.URL, "status error": st.Error, "logs": m.logs.String()} {
				if strings.Contains(s, "canary") {
					t.Errorf("%s holds the URL's key: %s", what, s)
				}
			}
			if st.URL != "http://docs.test:"+port+"/mcp?…" {
				t.Errorf("status URL = %q", st.URL)
			}
		})
	}
}
