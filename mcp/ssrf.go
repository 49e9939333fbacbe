package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Resolver maps a host name to addresses. Tests inject a stub that answers
// 127.0.0.x so nothing ever dials a non-loopback address.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// ErrBlockedAddress is returned when a URL or a resolved address points at a
// network that registered servers may not reach.
var ErrBlockedAddress = errors.New("address not allowed")

// blockedPrefixes are the ranges a registered server may not resolve to
// (reliability-security.md §6). IPv4-mapped IPv6 is refused as a whole.
var blockedPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
		"2001::/32", "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// checkAddr reports whether a may be dialled. Classification works on parsed
// addresses, never strings.
func checkAddr(a netip.Addr, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	if !a.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrBlockedAddress)
	}
	a = a.WithZone("")
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return fmt.Errorf("%w: %s is in %s", ErrBlockedAddress, a, p)
		}
	}
	return nil
}

// numericHost reports whether host looks like an IPv4 address written in a
// form that resolvers accept but netip does not (decimal 2130706433, octal
// 0177.0.0.1, hex 0x7f.1, short 127.1). Such hosts are refused outright.
func numericHost(host string) bool {
	if host == "" {
		return false
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		q := strings.ToLower(p)
		if strings.HasPrefix(q, "0x") {
			q = q[2:]
			if q == "" {
				return true
			}
			for _, r := range q {
				if !strings.ContainsRune("0123456789abcdef", r) {
					return false
				}
			}
			continue
		}
		for _, r := range q {
			if r < '0' || r > '9' {
				return false
			}
		}
	}
	return true
}

// checkHost validates a URL host (no port) before any resolution.
func checkHost(host string, allowPrivate bool) error {
	if host == "" {
		return errors.New("missing host")
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return checkAddr(a, allowPrivate)
	}
	if numericHost(h) {
		if allowPrivate {
			return nil
		}
		return fmt.Errorf("%w: numeric host %q", ErrBlockedAddress, host)
	}
	if !allowPrivate && (h == "localhost" || strings.HasSuffix(h, ".localhost")) {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, host)
	}
	return nil
}

// ValidateRegistrationURL checks a URL an admin wants to register: https only
// (http too when allowPrivate), no credentials, no command, path or stdio
// look-alikes, and a host that is not a blocked literal. Names are resolved
// and checked again at connect time.
func ValidateRegistrationURL(raw string, allowPrivate bool) error {
	s := strings.TrimSpace(raw)
	if s == "" {
		return errors.New("empty URL")
	}
	lower := strings.ToLower(s)
	switch {
	case strings.ContainsAny(s, " \t\r\n") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") ||
		strings.HasPrefix(s, "~") || strings.HasPrefix(lower, "stdio") || strings.HasPrefix(lower, "file:") ||
		strings.HasPrefix(lower, "npx") || strings.HasPrefix(lower, "uvx") || strings.ContainsAny(s, "|;`$<>\\"):
		return errors.New("looks like a command or a file path: only https:// URLs can be registered")
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return errors.New("URL contains control characters")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate {
			return errors.New("only https:// URLs can be registered")
		}
	default:
		return errors.New("only https:// URLs can be registered")
	}
	if u.Opaque != "" || u.Host == "" {
		return errors.New("URL has no host")
	}
	if u.User != nil {
		return errors.New("credentials in the URL are not allowed: pass them as headers")
	}
	if u.Fragment != "" {
		return errors.New("URL must not have a fragment")
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("invalid port %q", p)
		}
	}
	return checkHost(u.Hostname(), allowPrivate)
}

// safeDialer dials only addresses checkAddr allows; the check runs on the
// resolved address at connect time, which also defeats DNS rebinding.
type safeDialer struct {
	allowPrivate bool
	resolve      Resolver
	dialer       net.Dialer
}

func newSafeDialer(allowPrivate bool, resolve Resolver) *safeDialer {
	d := &safeDialer{allowPrivate: allowPrivate, resolve: resolve}
	d.dialer = net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
			}
			return checkAddr(ap.Addr(), d.allowPrivate)
		},
	}
	return d
}

func (d *safeDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if err := checkHost(host, d.allowPrivate); err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if d.resolve != nil {
		addrs, err = d.resolve(ctx, host)
		if err != nil {
			return nil, err
		}
	} else {
		addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, a := range addrs {
		a = a.Unmap()
		if err := checkAddr(a, d.allowPrivate); err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("no addresses for %s", host)
	}
	return nil, errors.Join(errs...)
}

// httpEnv builds the HTTP client of one connection: its own transport (so
// Close drops its sockets), no proxy (a proxy would hide the real address
// from the dialer), redirects re-validated, headers added only for the
// configured host, and the response statuses remembered for the SSE fallback.
type httpEnv struct {
	client    *http.Client
	transport *http.Transport
	statusMu  sync.Mutex
	statuses  []int
}

func newHTTPEnv(endpoint *url.URL, headers map[string]string, checked bool, allowPrivate bool, resolve Resolver, maxBody int) *httpEnv {
	env := &httpEnv{}
	tr := &http.Transport{
		Proxy:                 nil,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if checked {
		tr.DialContext = newSafeDialer(allowPrivate, resolve).DialContext
	} else {
		tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	env.transport = tr
	env.client = &http.Client{
		Transport: &headerTransport{next: tr, host: endpoint.Host, headers: headers, env: env, maxBody: int64(maxBody)},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if !checked {
				return nil
			}
			if req.URL.Scheme != "https" && !(allowPrivate && req.URL.Scheme == "http") {
				return fmt.Errorf("redirect to %s refused", req.URL.Scheme)
			}
			return checkHost(req.URL.Hostname(), allowPrivate)
		},
	}
	return env
}

func (e *httpEnv) sawStatus(codes ...int) bool {
	e.statusMu.Lock()
	defer e.statusMu.Unlock()
	for _, s := range e.statuses {
		for _, c := range codes {
			if s == c {
				return true
			}
		}
	}
	return false
}

func (e *httpEnv) close() { e.transport.CloseIdleConnections() }

type headerTransport struct {
	next    http.RoundTripper
	host    string
	headers map[string]string
	env     *httpEnv
	maxBody int64
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && req.URL.Host == t.host {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.env.statusMu.Lock()
		if len(t.env.statuses) < 64 {
			t.env.statuses = append(t.env.statuses, resp.StatusCode)
		}
		t.env.statusMu.Unlock()
		// go-sdk reads JSON response bodies with io.ReadAll; SSE streams are
		// long-lived and capped per event by the SDK instead.
		if t.maxBody > 0 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &limitedBody{rc: resp.Body, left: t.maxBody}
		}
	}
	return resp, err
}

// limitedBody fails a read once more than its limit has arrived.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("response body larger than the limit")
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		// Tell a body that ends exactly at the limit from a longer one.
		var one [1]byte
		if m, _ := b.rc.Read(one[:]); m > 0 {
			return n, fmt.Errorf("response body larger than the limit")
		}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
