package bot

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/provider"
)

// Downloads from Slack's file host. A file's url_private needs the
// workspace's bot token as a Bearer header, so the token must reach Slack's
// file host and nothing else: files.slack.com over https, or the exact
// scheme, host and port of the Web API (SLACK_API_URL: the emulator serves
// files there; in production it is slack.com, which gets the token with
// every call anyway). Redirects are never followed blindly: net/http keeps
// the Authorization header on a redirect to the same host name on another
// port, so every hop is checked here. Slack answers a token that may not
// read a file with a 302 to its sign-in page ("/?redir=…"), not a 401:
// that is a failure, not a file.
//
// Downloads are not Web API methods: Slack publishes no tier for its file
// host, and the governor's budgets (per method and workspace, spent in
// Redis) would make a message with eight screenshots wait for a Tier 3
// budget meant for chat edits. So they spend no budget; they are bounded
// by this process's download concurrency, per-file size caps and the
// turn's time limit, and counted in bobbin_slack_file_downloads_total.

var (
	errForeignHost     = errors.New("the URL is not on Slack's file host")
	errForeignRedirect = errors.New("the file host redirected off its own host")
	errSignIn          = errors.New("the file host answered with Slack's sign-in page: the token may not read this file")
	errFileTooLarge    = errors.New("the file is larger than its size limit")
)

// maxDownloads bounds this process's concurrent file downloads.
const maxDownloads = 8

// maxFileHops bounds the redirects followed within Slack's file host.
const maxFileHops = 3

// origin is a URL's scheme, host name and port, all three compared.
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "https":
			o.port = "443"
		case "http":
			o.port = "80"
		}
	}
	return o
}

// slackFileHost is Slack's file host.
var slackFileHost = origin{scheme: "https", host: "files.slack.com", port: "443"}

// fileFetcher downloads files from Slack with a workspace's token.
type fileFetcher struct {
	hc  *http.Client
	api origin // SLACK_API_URL's
	sem chan struct{}
	m   *Metrics
}

// newFileFetcher builds the downloader. It takes rt (the bot's transport,
// without the Web API governor) and follows no redirect by itself.
func newFileFetcher(rt http.RoundTripper, apiURL string, m *Metrics) *fileFetcher {
	f := &fileFetcher{
		hc: &http.Client{
			Transport: cmp.Or(rt, http.DefaultTransport),
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
			Timeout: 2 * time.Minute,
		},
		sem: make(chan struct{}, maxDownloads),
		m:   m,
	}
	if u, err := url.Parse(apiURL); err == nil && u.Host != "" {
		f.api = originOf(u)
	}
	return f
}

// mayReceiveToken reports whether the token may be sent to u.
func (f *fileFetcher) mayReceiveToken(u *url.URL) bool {
	if u == nil || u.User != nil || u.Host == "" {
		return false
	}
	o := originOf(u)
	return o == slackFileHost || (f.api.host != "" && o == f.api)
}

// fetch downloads rawURL with token, reading at most limit bytes: more is
// errFileTooLarge, unless truncate, when the first limit bytes come back
// with cut set. html says an HTML answer is what the file is (else an HTML
// page is Slack's sign-in page).
func (f *fileFetcher) fetch(ctx context.Context, token, rawURL string, limit int64, truncate, html bool) (data []byte, cut bool, err error) {
	result := "error"
	defer func() {
		f.m.FileDownloads.WithLabelValues(result).Inc()
		f.m.FileDownloadBytes.Add(float64(len(data)))
	}()
	u, err := url.Parse(rawURL)
	if err != nil || !f.mayReceiveToken(u) {
		result = "refused_host"
		return nil, false, errForeignHost
	}
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	defer func() { <-f.sem }()

	start := originOf(u)
	for hop := 0; ; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, false, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := f.hc.Do(req)
		if err != nil {
			return nil, false, fmt.Errorf("downloading a file: %w", err)
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			loc, lerr := resp.Location()
			drain(resp)
			switch {
			case lerr != nil:
				return nil, false, fmt.Errorf("downloading a file: redirect without a location: %w", lerr)
			case loc.Query().Get("redir") != "" || loc.Path == "" || loc.Path == "/":
				result = "sign_in"
				return nil, false, errSignIn
			case originOf(loc) != start || !f.mayReceiveToken(loc):
				result = "refused_redirect"
				return nil, false, errForeignRedirect
			case hop+1 >= maxFileHops:
				return nil, false, errors.New("downloading a file: too many redirects")
			}
			u = loc
			continue
		}
		defer drain(resp)
		if resp.StatusCode != http.StatusOK {
			result = "http_" + fmt.Sprint(resp.StatusCode)
			return nil, false, fmt.Errorf("downloading a file: HTTP %d", resp.StatusCode)
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/html" && !html {
			result = "sign_in"
			return nil, false, errSignIn
		}
		if resp.ContentLength > limit && !truncate {
			result = "too_large"
			return nil, false, errFileTooLarge
		}
		// Sized from Content-Length when it is given: one allocation for
		// the file instead of ReadAll's doublings.
		var buf bytes.Buffer
		buf.Grow(int(min(max(resp.ContentLength, 0), limit)) + bytes.MinRead)
		if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
			return nil, false, fmt.Errorf("downloading a file: %w", err)
		}
		data = buf.Bytes()
		if int64(len(data)) > limit {
			if !truncate {
				result, data = "too_large", nil
				return nil, false, errFileTooLarge
			}
			data, cut = data[:limit], true
		}
		result = "ok"
		return data, cut, nil
	}
}

// drain reads a little of an answer's body and closes it, so the
// connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
}

// fileLoader is agent.FileLoader for one workspace's turns: it fetches an
// image or PDF a transcript refers to again (a later turn, another replica,
// a restarted process). The agent keeps the bounded cache of prepared
// bytes; this only downloads.
type fileLoader struct {
	b    *Bot
	team string
}

// LoadFile downloads ref's bytes with the workspace's token.
func (l fileLoader) LoadFile(ctx context.Context, ref provider.FileRef) ([]byte, error) {
	if ref.Source != "" {
		return nil, errors.New("not a shared Slack file")
	}
	u := ref.URL
	if u == "" {
		f, err := l.b.fileInfo(ctx, l.team, ref.ID)
		if err != nil {
			return nil, err
		}
		u = f.downloadURL()
	}
	limit := int64(provider.MaxImageFileBytes)
	if ref.MimeType == provider.MimePDF {
		limit = provider.MaxDocumentBytes
	}
	data, _, err := l.b.files.fetch(ctx, l.b.botToken(ctx, l.team), u, limit, false, false)
	return data, err
}
