package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestValidateRegistrationURL(t *testing.T) {
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		ok           bool
	}{
		{"https://mcp.example.com/mcp", false, true},
		{"https://mcp.example.com:8443/mcp?x=1", false, true},
		{"https://93.184.216.34/mcp", false, true},
		{"https://[2606:4700::1111]/mcp", false, true},
		{"http://mcp.example.com/mcp", false, false}, // https only
		{"http://mcp.example.com/mcp", true, true},
		{"https://127.0.0.1/mcp", false, false},
		{"https://127.0.0.1/mcp", true, true},
		{"https://127.1/mcp", false, false},              // short form
		{"https://2130706433/mcp", false, false},         // decimal 127.0.0.1
		{"https://0177.0.0.1/mcp", false, false},         // octal
		{"https://0x7f.0.0.1/mcp", false, false},         // hex
		{"https://0x7f000001/mcp", false, false},         // hex, one part
		{"https://017700000001/mcp", false, false},       // octal, one part
		{"https://[::1]/mcp", false, false},              // IPv6 loopback
		{"https://[::ffff:127.0.0.1]/mcp", false, false}, // IPv4-mapped
		{"https://[::ffff:7f00:1]/mcp", false, false},    // IPv4-mapped, hex
		{"https://[64:ff9b::7f00:1]/mcp", false, false},  // NAT64
		{"https://[fe80::1%25eth0]/mcp", false, false},   // link-local with zone
		{"https://[fd00::1]/mcp", false, false},          // unique local
		{"https://[::]/mcp", false, false},
		{"https://0.0.0.0/mcp", false, false},
		{"https://10.1.2.3/mcp", false, false},
		{"https://172.16.0.1/mcp", false, false},
		{"https://172.31.255.255/mcp", false, false},
		{"https://172.32.0.1/mcp", false, true},
		{"https://192.168.1.1/mcp", false, false},
		{"https://169.254.169.254/latest/meta-data", false, false}, // cloud metadata
		{"https://100.64.0.1/mcp", false, false},                   // CGNAT
		{"https://224.0.0.1/mcp", false, false},                    // multicast
		{"https://[ff02::1]/mcp", false, false},
		{"https://255.255.255.255/mcp", false, false},
		{"https://localhost/mcp", false, false},
		{"https://LOCALHOST./mcp", false, false},
		{"https://api.localhost/mcp", false, false},
		{"https://user:pass@mcp.example.com/mcp", false, false}, // userinfo
		{"https://user@mcp.example.com/mcp", false, false},
		{"https://mcp.example.com@127.0.0.1/mcp", false, false},
		{"https://mcp.example.com:0/mcp", false, false},
		{"https://mcp.example.com:99999/mcp", false, false},
		{"https://mcp.example.com/mcp#frag", false, false},
		{"npx -y @modelcontextprotocol/server-memory", false, false},
		{"uvx mcp-server-fetch", false, false},
		{"/usr/local/bin/mcp-server", false, false},
		{"./server.js", false, false},
		{"~/bin/server", false, false},
		{"stdio", false, false},
		{"stdio://server", false, false},
		{"file:///etc/passwd", false, false},
		{"ftp://mcp.example.com/", false, false},
		{"https://mcp.example.com/$(id)", false, false},
		{"https://mcp.example.com/mcp; rm -rf /", false, false},
		{"https:///mcp", false, false},
		{"https:mcp.example.com", false, false},
		{"", false, false},
		{"javascript:alert(1)", false, false},
		{"https://mcp.example.com/\x00", false, false},
	} {
		err := ValidateRegistrationURL(tc.url, tc.allowPrivate)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateRegistrationURL(%q, allowPrivate=%v) = %v, want ok=%v", tc.url, tc.allowPrivate, err, tc.ok)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"2606:4700::1111", true},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"10.0.0.1", false},
		{"100.127.255.255", false},
		{"100.128.0.1", true},
		{"169.254.1.1", false},
		{"192.0.0.8", false},
		{"198.18.0.1", false},
		{"0.1.2.3", false},
		{"240.0.0.1", false},
		{"::", false},
		{"::1", false},
		{"::ffff:8.8.8.8", false}, // mapped forms are refused outright
		{"64:ff9b::808:808", false},
		{"2002:7f00:1::", false}, // 6to4 embedding 127.0.0.1
		{"2001:0:4136:e378::1", false},
		{"fc00::1", false},
		{"fe80::1", false},
		{"ff05::2", false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if err := checkAddr(a, false); (err == nil) != tc.ok {
			t.Errorf("checkAddr(%s) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if err := checkAddr(a, true); err != nil {
			t.Errorf("checkAddr(%s, allowPrivate) = %v", tc.addr, err)
		}
	}
}

// TestSafeDialer dials through the stub resolver only (names → 127.0.0.x).
func TestSafeDialer(t *testing.T) {
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "rebind.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
		case "mapped.test":
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		}
		return nil, errors.New("unknown host")
	}
	d := newSafeDialer(false, resolve)
	for _, addr := range []string{"rebind.test:443", "mapped.test:443", "127.0.0.1:443", "[::1]:443", "2130706433:443"} {
		if _, err := d.DialContext(context.Background(), "tcp", addr); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("dial %s: err = %v, want ErrBlockedAddress", addr, err)
		}
	}
	// The Control hook is the last line: it sees the address actually dialled.
	if err := d.dialer.Control("tcp", "127.0.0.1:80", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("Control(127.0.0.1) = %v", err)
	}
}

func TestRedirectRevalidated(t *testing.T) {
	u, _ := url.Parse("https://mcp.example.com/mcp")
	env := newHTTPEnv(u, map[string]string{"Authorization": "Bearer x"}, true, false, stubResolver, 1<<20)
	for _, target := range []string{"https://127.0.0.1/", "http://mcp.example.com/", "https://[::1]/", "https://0x7f.1/"} {
		req, _ := http.NewRequest("GET", target, nil)
		if err := env.client.CheckRedirect(req, []*http.Request{{}}); err == nil {
			t.Errorf("redirect to %s allowed", target)
		}
	}
	req, _ := http.NewRequest("GET", "https://other.example.com/", nil)
	if err := env.client.CheckRedirect(req, []*http.Request{{}}); err != nil {
		t.Errorf("redirect to a public https host refused: %v", err)
	}
	if env.transport.Proxy != nil {
		t.Error("the transport uses a proxy: the dialer would check the proxy's address")
	}
}

func FuzzValidateRegistrationURL(f *testing.F) {
	for _, s := range []string{"https://mcp.example.com/mcp", "https://127.1", "https://[::ffff:127.0.0.1]", "npx x", "https://a@b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if ValidateRegistrationURL(raw, false) != nil {
			return
		}
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Scheme != "https" || u.User != nil || u.Host == "" {
			t.Fatalf("accepted %q", raw)
		}
		if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && checkAddr(a, false) != nil {
			t.Fatalf("accepted blocked literal %q", raw)
		}
	})
}

func TestResponseBodyCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.Repeat("x", atoi(r.URL.Query().Get("n"))))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	env := newHTTPEnv(u, nil, false, false, nil, 1000)
	defer env.close()
	for _, tc := range []struct {
		n  int
		ok bool
	}{{10, true}, {1000, true}, {1001, false}, {5000, false}} {
		resp, err := env.client.Get(fmt.Sprintf("%s/?n=%d", srv.URL, tc.n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if (err == nil) != tc.ok || (tc.ok && len(b) != tc.n) {
			t.Errorf("body of %d bytes: read %d, err %v; want ok=%v", tc.n, len(b), err, tc.ok)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}
