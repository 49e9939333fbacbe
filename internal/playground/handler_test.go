package playground

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// hostile is what a person, a name or the model may type.
const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`

// testPage runs the page's handler against a real emulator with a
// workspace whose names are hostile too.
func testPage(t *testing.T) (*Server, *slackemu.Server, Credentials, *httptest.Server) {
	t.Helper()
	ws := DefaultWorkspace()
	ws.People[1].RealName = hostile
	ws.Rooms[1].Topic = hostile
	creds := NewCredentials()
	emu := slackemu.New(EmulatorOptions(ws, creds))
	t.Cleanup(emu.Close)
	page := New(Options{Slack: emu, Workspace: ws, Model: ModelInfo{Demo: true, Name: DemoModelName}, LoopbackOnly: true})
	t.Cleanup(page.Close)
	hs := httptest.NewServer(page)
	t.Cleanup(hs.Close)
	return page, emu, creds, hs
}

func post(t *testing.T, hs *httptest.Server, path string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, hs.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, "1")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func get(t *testing.T, hs *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := hs.Client().Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// botCall makes a Web API call as the bot, as the bot's slack-go client
// would, with form arguments.
func botCall(t *testing.T, emu *slackemu.Server, token, method string, args url.Values) map[string]any {
	t.Helper()
	out, err := apiCall(emu, token, method, args)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apiCall is botCall for goroutines: it returns the error.
func apiCall(emu *slackemu.Server, token, method string, args url.Values) (map[string]any, error) {
	req, _ := http.NewRequest(http.MethodPost, emu.APIURL()+method, strings.NewReader(args.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if out["ok"] != true {
		return out, fmt.Errorf("%s: %v", method, out)
	}
	return out, nil
}

// noMarkup fails when a response body carries a raw < or > (JSON escapes
// them as \u003c and \u003e, so no string in it can become markup if a
// page ever mishandled it) and when the decoded body lacks want.
func noMarkup(t *testing.T, where, body, want string) {
	t.Helper()
	if strings.ContainsAny(body, "<>") {
		t.Errorf("%s: the answer holds a raw < or >:\n%s", where, body)
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%s: not JSON: %v", where, err)
	}
	if want != "" && !hasString(v, want) {
		t.Errorf("%s: %q is lost (text must arrive intact, as text):\n%s", where, want, body)
	}
}

// hasString reports whether a decoded JSON value holds a string
// containing want.
func hasString(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, want)
	case []any:
		for _, e := range x {
			if hasString(e, want) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasString(e, want) {
				return true
			}
		}
	}
	return false
}

// slackEscape escapes text for a mrkdwn field, as the bot does
// (mrkdwn.EscapeText).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func TestSecurityHeaders(t *testing.T) {
	_, _, _, hs := testPage(t)
	for _, path := range []string{"/", "/static/app.js", "/static/app.css", "/api/state", "/api/view?as=U0ALICE&channel=C0GENERAL"} {
		resp, _ := get(t, hs, path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", path, resp.StatusCode)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP allows %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
}

// TestPageHasNoInlineCode: the page's HTML has no inline script, style
// or handler, and its script never parses strings as HTML or code.
func TestPageHasNoInlineCode(t *testing.T) {
	html, err := webFiles.ReadFile("web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`<script(?:[^>](?:[^s]|s[^r]|sr[^c]))*>\s*[^<\s]`, `\son[a-z]+\s*=`, `\sstyle\s*=`, `<style`, `javascript:`} {
		if m := regexp.MustCompile(`(?i)` + re).Find(html); m != nil {
			t.Errorf("index.html has inline code %q", m)
		}
	}
	js, err := webFiles.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('on", "srcdoc"} {
		if bytes.Contains(js, []byte(bad)) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}

func TestRefusedRequests(t *testing.T) {
	_, _, _, hs := testPage(t)
	send := func(host, ctype, csrf, site string) int {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/post", strings.NewReader(`{"as":"U0ALICE","channel":"C0GENERAL","text":"hi"}`))
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Content-Type", ctype)
		if csrf != "" {
			req.Header.Set(csrfHeader, csrf)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name                    string
		host, ctype, csrf, site string
		want                    int
	}{
		{"no CSRF header", "", "application/json", "", "", http.StatusForbidden},
		{"cross-site", "", "application/json", "1", "cross-site", http.StatusForbidden},
		{"form post", "", "application/x-www-form-urlencoded", "1", "", http.StatusUnsupportedMediaType},
		{"DNS rebinding", "evil.example:3000", "application/json", "1", "", http.StatusMisdirectedRequest},
		{"localhost", "localhost:3000", "application/json", "1", "same-origin", http.StatusOK},
	} {
		if got := send(tc.host, tc.ctype, tc.csrf, tc.site); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		body any
		want int
	}{
		{map[string]string{"as": "UNOBODY", "channel": "C0GENERAL", "text": "x"}, http.StatusBadRequest},
		{map[string]string{"as": "U0ALICE", "channel": "C0NOPE", "text": "x"}, http.StatusBadRequest},
		{map[string]string{"as": "U0ALICE", "channel": "D0BOB", "text": "x"}, http.StatusForbidden},
		{map[string]string{"as": "U0ALICE", "channel": "C0GENERAL", "text": "/kick everyone"}, http.StatusBadRequest},
		{map[string]string{"as": "U0ALICE", "channel": "C0GENERAL", "text": strings.Repeat("x", 4001)}, http.StatusBadRequest},
		{map[string]any{"as": "U0ALICE", "channel": "C0GENERAL", "text": "x", "extra": 1}, http.StatusBadRequest},
	} {
		if got, body := post(t, hs, "/api/post", tc.body); got != tc.want {
			t.Errorf("post %v: %d %s, want %d", tc.body, got, body, tc.want)
		}
	}
}

// TestEscaping: every string a person, a name or the model typed reaches
// the page as JSON-escaped text, intact.
func TestEscaping(t *testing.T) {
	_, emu, creds, hs := testPage(t)
	_, body := get(t, hs, "/api/state")
	noMarkup(t, "state", body, hostile)

	// A person's message, as typed.
	if code, body := post(t, hs, "/api/post", map[string]any{"as": "U0BOB", "channel": "C0GENERAL", "text": "@bobbin " + hostile}); code != http.StatusOK {
		t.Fatalf("post: %d %s", code, body)
	}
	// The bot's message with Block Kit the model's words ended up in.
	blocks, _ := json.Marshal([]any{
		map[string]any{"type": "header", "text": map[string]string{"type": "plain_text", "text": hostile}},
		map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": "<javascript:alert(3)|" + slackEscape(hostile) + ">"}},
		map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button", "action_id": "x", "url": "javascript:alert(4)",
			"text": map[string]string{"type": "plain_text", "text": hostile}}}},
	})
	botCall(t, emu, creds.BotToken, "chat.postMessage", url.Values{"channel": {"C0GENERAL"}, "text": {slackEscape(hostile)}, "blocks": {string(blocks)}})
	botCall(t, emu, creds.BotToken, "chat.postMessage", url.Values{"channel": {"C0GENERAL"}, "markdown_text": {"**x** " + slackEscape(hostile)}})
	botCall(t, emu, creds.BotToken, "chat.postEphemeral", url.Values{"channel": {"C0GENERAL"}, "user": {"U0BOB"}, "text": {slackEscape(hostile)}})

	_, body = get(t, hs, "/api/view?as=U0BOB&channel=C0GENERAL")
	noMarkup(t, "view", body, hostile)
	if strings.Contains(body, "javascript") {
		t.Errorf("a javascript: URL reached the page: %s", body)
	}
	var v viewResp
	_ = json.Unmarshal([]byte(body), &v)
	if len(v.Channel) != 4 || !v.Channel[3].Ephemeral {
		t.Fatalf("view has %d messages, want the post, two bot messages and the ephemeral: %s", len(v.Channel), body)
	}
	for i, m := range v.Channel {
		all := plainText(m.Text)
		for _, b := range m.Blocks {
			all += plainText(b.Text)
		}
		if !strings.Contains(all, hostile) {
			t.Errorf("message %d reads %q, want the hostile text intact", i, all)
		}
	}
	if got := plainText(v.Channel[1].Blocks[1].Text); got != hostile {
		t.Errorf("the link with a javascript: target reads %q, want its label as text", got)
	}
	if got := plainText(v.Channel[0].Text); !strings.Contains(got, hostile) {
		t.Errorf("the person's words came out as %q", got)
	}
	if got := v.Channel[1].Blocks[2].Elements[0]; got.Label != hostile || got.URL != "" {
		t.Errorf("button = %+v", got)
	}
}

// TestModalRoundTrip: a modal the bot opens shows; a submission the bot
// answers with field errors keeps it open with the (escaped) errors; the
// close button closes it.
func TestModalRoundTrip(t *testing.T) {
	_, emu, creds, hs := testPage(t)
	// The bot's side: a socket that answers the slash command by opening
	// a form, and its submission with an error.
	submitted := make(chan string, 1)
	bot := startBot(t, emu, creds, func(envType string, payload map[string]any) any {
		switch envType {
		case slackemu.TypeSlashCommands:
			view := `{"type":"modal","callback_id":"f","title":{"type":"plain_text","text":"Add"},"submit":{"type":"plain_text","text":"Save"},
			  "blocks":[{"type":"input","block_id":"name","label":{"type":"plain_text","text":"Name"},"element":{"type":"plain_text_input","action_id":"n"}},
			  {"type":"input","block_id":"opts","optional":true,"label":{"type":"plain_text","text":"Options"},"element":{"type":"checkboxes","action_id":"c",
			    "options":[{"text":{"type":"plain_text","text":"Trusted"},"value":"trusted"},{"text":{"type":"plain_text","text":"Quiet"},"value":"quiet"}]}}]}`
			trigger, _ := payload["trigger_id"].(string)
			go func() {
				if _, err := apiCall(emu, creds.BotToken, "views.open", url.Values{"trigger_id": {trigger}, "view": {view}}); err != nil {
					t.Error(err)
				}
			}()
			return nil
		case slackemu.TypeInteractive:
			b, _ := json.Marshal(payload)
			submitted <- string(b)
			return map[string]any{"response_action": "errors", "errors": map[string]string{"name": "no " + hostile}}
		}
		return nil
	})
	defer bot()
	if code, body := post(t, hs, "/api/post", map[string]any{"as": "U0CAROL", "channel": "C0GENERAL", "text": "/bobbin mcp add"}); code != http.StatusAccepted {
		t.Fatalf("slash: %d %s", code, body)
	}
	var v viewResp
	waitUntil(t, "the modal", func() bool {
		_, body := get(t, hs, "/api/view?as=U0CAROL&channel=C0GENERAL")
		_ = json.Unmarshal([]byte(body), &v)
		return v.Modal != nil
	})
	if v.Modal.Title != "Add" || v.Modal.Submit != "Save" || len(v.Modal.Blocks) != 2 || v.Modal.Blocks[0].Label != "Name" {
		t.Errorf("modal = %+v", v.Modal)
	}
	if in := v.Modal.Blocks[1].Input; in == nil || in.Kind != "checkboxes" || len(in.Options) != 2 || in.Options[0].Label != "Trusted" {
		t.Errorf("checkboxes = %+v", in)
	}
	code, body := post(t, hs, "/api/submit", map[string]any{"as": "U0CAROL", "view_id": v.Modal.ID, "values": map[string]any{"name": hostile, "opts": []string{"trusted"}}})
	if code != http.StatusOK || !strings.Contains(body, `"action":"errors"`) {
		t.Fatalf("submit: %d %s", code, body)
	}
	if got := <-submitted; !strings.Contains(got, `"selected_options":[{"text":{"text":"Trusted","type":"plain_text"},"value":"trusted"}]`) {
		t.Errorf("the bot got %s; want the checked box only", got)
	}
	_, body = get(t, hs, "/api/view?as=U0CAROL&channel=C0GENERAL")
	noMarkup(t, "modal with errors", body, "no "+hostile)
	_ = json.Unmarshal([]byte(body), &v)
	if v.Modal == nil || v.Modal.Blocks[0].Error != "no "+hostile {
		t.Fatalf("after the errors: %+v", v.Modal)
	}
	if code, body := post(t, hs, "/api/close", map[string]any{"as": "U0CAROL", "view_id": v.Modal.ID}); code != http.StatusOK {
		t.Fatalf("close: %d %s", code, body)
	}
	_, body = get(t, hs, "/api/view?as=U0CAROL&channel=C0GENERAL")
	if strings.Contains(body, `"modal"`) {
		t.Errorf("the modal is still open: %s", body)
	}
}

// TestFiles: images show inline; anything else (SVG included, which can
// carry script) downloads as text.
func TestFiles(t *testing.T) {
	_, _, _, hs := testPage(t)
	var pngBuf bytes.Buffer
	_ = png.Encode(&pngBuf, image.NewRGBA(image.Rect(0, 0, 2, 2)))
	png := pngBuf.Bytes()
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	code, body := post(t, hs, "/api/post", map[string]any{"as": "U0ALICE", "channel": "C0GENERAL", "text": "files",
		"files": []any{map[string]string{"name": "pixel.png", "data": base64.StdEncoding.EncodeToString(png)},
			map[string]string{"name": "../../x.svg", "data": base64.StdEncoding.EncodeToString(svg)}}})
	if code != http.StatusOK {
		t.Fatalf("post: %d %s", code, body)
	}
	_, body = get(t, hs, "/api/view?as=U0ALICE&channel=C0GENERAL")
	var v viewResp
	_ = json.Unmarshal([]byte(body), &v)
	if len(v.Channel) != 1 || len(v.Channel[0].Files) != 2 {
		t.Fatalf("view = %s", body)
	}
	img, svgRef := v.Channel[0].Files[0], v.Channel[0].Files[1]
	if !img.Image || svgRef.Image || svgRef.Name != "x.svg" {
		t.Errorf("files = %+v", v.Channel[0].Files)
	}
	resp, got := get(t, hs, "/api/files/"+img.ID)
	if resp.Header.Get("Content-Type") != "image/png" || got != string(png) {
		t.Errorf("image served as %q (%d bytes)", resp.Header.Get("Content-Type"), len(got))
	}
	resp, _ = get(t, hs, "/api/files/"+svgRef.ID)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || resp.Header.Get("Content-Disposition") != "attachment" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("SVG served as %q, %q, CSP %q", ct, resp.Header.Get("Content-Disposition"), resp.Header.Get("Content-Security-Policy"))
	}
	if resp, _ := get(t, hs, "/api/files/FNOPE"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown file: %d", resp.StatusCode)
	}
}

// TestEventsStream: the live-update stream says "change" when something
// changes, and ends when the server closes.
func TestEventsStream(t *testing.T) {
	page, _, _, hs := testPage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/api/events", nil)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	buf := make([]byte, 256)
	read := func() string {
		n, err := resp.Body.Read(buf)
		if err != nil && n == 0 {
			return "EOF"
		}
		return string(buf[:n])
	}
	if first := read(); !strings.Contains(first, "event: change") {
		t.Fatalf("first event %q", first)
	}
	post(t, hs, "/api/post", map[string]any{"as": "U0ALICE", "channel": "C0GENERAL", "text": "hello"})
	if next := read(); !strings.Contains(next, "event: change") {
		t.Errorf("after a post: %q", next)
	}
	page.Close()
	for range 5 {
		if read() == "EOF" {
			return
		}
	}
	t.Error("the stream did not end after Close")
}

// TestSlackText: composer text becomes Slack's: escaped, with mentions.
func TestSlackText(t *testing.T) {
	page, _, _, _ := testPage(t)
	for in, want := range map[string]string{
		"@bobbin hi":           "<@U0BOBBIN> hi",
		"ask @alice & @Bob <3": "ask <@U0ALICE> &amp; <@U0BOB> &lt;3",
		"mail a@bobbin.dev":    "mail a@bobbin.dev",
		"@nobody":              "@nobody",
	} {
		if got := page.slackText(in); got != want {
			t.Errorf("slackText(%q) = %q, want %q", in, got, want)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after 20s", what)
		}
	}
}

// startBot is a minimal socket-mode app: it acks every envelope with what
// answer returns for it (nil: an empty ack). stop ends it.
func startBot(t *testing.T, emu *slackemu.Server, creds Credentials, answer func(envType string, payload map[string]any) any) (stop func()) {
	t.Helper()
	out := botCall(t, emu, creds.AppToken, "apps.connections.open", url.Values{})
	ws, _, err := websocket.DefaultDialer.Dial(out["url"].(string), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var env struct {
				Type       string         `json:"type"`
				EnvelopeID string         `json:"envelope_id"`
				Payload    map[string]any `json:"payload"`
			}
			if err := ws.ReadJSON(&env); err != nil {
				return
			}
			if env.EnvelopeID == "" {
				continue
			}
			ack := map[string]any{"envelope_id": env.EnvelopeID}
			if p := answer(env.Type, env.Payload); p != nil {
				ack["payload"] = p
			}
			if err := ws.WriteJSON(ack); err != nil {
				return
			}
		}
	}()
	return func() {
		_ = ws.Close()
		<-done
	}
}
