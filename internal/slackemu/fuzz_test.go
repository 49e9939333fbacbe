package slackemu_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// FuzzWebAPI throws arbitrary bodies at arbitrary methods: the emulator
// must answer every one with JSON and keep serving.
func FuzzWebAPI(f *testing.F) {
	seeds := []struct{ method, ct, body string }{
		{"chat.postMessage", "application/x-www-form-urlencoded", "token=" + slackemu.BotToken + "&channel=C111&text=hi"},
		{"chat.update", "application/x-www-form-urlencoded", "token=" + slackemu.BotToken + "&channel=C111&ts=1.000001&blocks=%5B%5D"},
		{"chat.startStream", "application/json", `{"token":"` + slackemu.BotToken + `","channel":"C111","chunks":[{"type":"blocks","blocks":7}]}`},
		{"views.open", "application/json", `{"token":"` + slackemu.BotToken + `","trigger_id":"1.2.3","view":"{\"type\":\"modal\"}"}`},
		{"chat.postMessage", "application/json", `[1,2,3]`},
		{"chat.postMessage", "application/json", `{"token":` + strings.Repeat("[", 1000)},
		{"assistant.threads.setSuggestedPrompts", "application/x-www-form-urlencoded", "token=" + slackemu.BotToken + "&channel_id=D111&prompts=%7B"},
		{"../../hooks/x", "text/plain", "\x00\xff"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.ct, []byte(s.body))
	}
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	f.Cleanup(emu.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, method, ct string, body []byte) {
		req, err := http.NewRequest(http.MethodPost, emu.APIURL()+strings.ReplaceAll(method, "?", ""), bytes.NewReader(body))
		if err != nil {
			return // not a valid URL path: nothing to send
		}
		req.Header.Set("Content-Type", strings.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e {
				return -1
			}
			return r
		}, ct))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !bytes.HasPrefix(b, []byte(`{"`)) {
			t.Fatalf("%s %q: body %q", method, body, b)
		}
	})
}

// FuzzAckFrames sends arbitrary client frames: the socket must stay up.
func FuzzAckFrames(f *testing.F) {
	for _, s := range []string{`{"envelope_id":"x"}`, `{"envelope_id":"x","payload":{}}`, ``, `{`, `[]`, `{"envelope_id":7}`, `{"envelope_id":"` + strings.Repeat("a", 30000) + `"}`} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte{0, 1, 2}, true)
	emu := slackemu.New(slackemu.Options{})
	f.Cleanup(emu.Close)
	ws := func() *websocket.Conn {
		_, u, err := botClient(emu).StartSocketModeContext(f.Context())
		if err != nil {
			f.Fatal(err)
		}
		c, _, err := websocket.DefaultDialer.Dial(u, nil)
		if err != nil {
			f.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil { // hello
			f.Fatal(err)
		}
		return c
	}()
	f.Cleanup(func() { ws.Close() })
	f.Fuzz(func(t *testing.T, data []byte, binary bool) {
		typ := websocket.TextMessage
		if binary {
			typ = websocket.BinaryMessage
		}
		if err := ws.WriteMessage(typ, data); err != nil {
			t.Fatalf("write: %v", err)
		}
		// A probe ack read after the frame proves the server still reads
		// this socket.
		prev := acksRead(emu)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"envelope_id":"probe"}`)); err != nil {
			t.Fatalf("write probe: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := emu.WaitFor(ctx, func() bool { return acksRead(emu) > prev }); err != nil {
			t.Fatalf("socket stopped reading after %q: %v", data, err)
		}
	})
}

// acksRead is the number of ack frames the only socket has delivered (-1
// when it is gone).
func acksRead(emu *slackemu.Server) int {
	cs := emu.Connections()
	if len(cs) != 1 {
		return -1
	}
	return cs[0].Acks
}

// FuzzFileRequests throws arbitrary paths, tokens and upload bodies at the
// file host and the upload endpoint: every answer is a redirect to the
// sign-in page, a 404/4xx, or the bytes of the one real file for the one
// token that may read it; the server keeps serving.
func FuzzFileRequests(f *testing.F) {
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	f.Cleanup(emu.Close)
	p, err := emu.Post(slackemu.UserPost{Team: slackemu.TeamID, Channel: slackemu.ChannelGen, User: slackemu.UserAlice, Silent: true,
		Files: []slackemu.File{{Name: "a b.txt", Content: []byte("secret-bytes")}}})
	if err != nil {
		f.Fatal(err)
	}
	real := p.Files[0]
	for _, s := range []string{
		real.URLPrivate[len(emu.URL()):], real.URLPrivateDownload[len(emu.URL()):], "/files-pri/T111-/x", "/files-pri/-F1/x",
		"/files-pri/T111-F1", "/files-pri/T111-F1/download/", "/files-tmb/T111-F1-k/x_64.png", "/files-tmb/a-b-c-d/x",
		"/files-pri/T111-" + real.ID + "/../../api/auth.test", "/files-pri/%2e%2e/x",
	} {
		f.Add(s, uint8(0), "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nhi\r\n--x--\r\n"))
		f.Add(s, uint8(1), "text/plain", []byte("raw"))
	}
	tokens := []string{"", slackemu.BotToken, slackemu.BotToken2, slackemu.AppToken, "xoxb-nope"}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	api := botClient(emu)
	f.Fuzz(func(t *testing.T, path string, tok uint8, ct string, body []byte) {
		token := tokens[int(tok)%len(tokens)]
		req, err := http.NewRequest(http.MethodGet, emu.URL()+"/files-pri/"+strings.TrimPrefix(path, "/files-pri/"), nil)
		if err != nil {
			return
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %q: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			if token != slackemu.BotToken || !bytes.Equal(b, []byte("secret-bytes")) {
				t.Fatalf("GET %q with %q: 200 %q", path, token, b)
			}
		case http.StatusFound:
			if !strings.HasPrefix(resp.Header.Get("Location"), emu.URL()+"/?redir=") {
				t.Fatalf("GET %q: redirect to %q", path, resp.Header.Get("Location"))
			}
		default:
			if resp.StatusCode >= 500 || bytes.Contains(b, []byte("secret-bytes")) {
				t.Fatalf("GET %q: HTTP %d %q", path, resp.StatusCode, b)
			}
		}
		// The upload endpoint takes any body without breaking.
		up, err := api.GetUploadURLExternalContext(t.Context(), slack.GetUploadURLExternalParameters{FileName: "f.bin", FileSize: 16})
		if err != nil {
			t.Fatalf("getUploadURLExternal: %v", err)
		}
		preq, _ := http.NewRequest(http.MethodPost, up.UploadURL, bytes.NewReader(body))
		preq.Header.Set("Content-Type", strings.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e {
				return -1
			}
			return r
		}, ct))
		presp, err := client.Do(preq)
		if err != nil {
			t.Fatalf("upload: %v", err)
		}
		presp.Body.Close()
		if presp.StatusCode >= 500 {
			t.Fatalf("upload %q %q: HTTP %d", ct, body, presp.StatusCode)
		}
	})
}

// FuzzEventContextAndCursor feeds arbitrary event_context and cursor
// values to the methods that decode them: answers are JSON errors or
// results, never a failure to answer.
func FuzzEventContextAndCursor(f *testing.F) {
	for _, s := range []string{"4-eyJ0IjoiVDExMSJ9", "4-", "", "bmV4dF90czoxNzAwMDAwMDAwLjAwMDEwMA==", "!!", "4-" + strings.Repeat("A", 5000)} {
		f.Add(s)
	}
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	f.Cleanup(emu.Close)
	p := emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, "hi", "")
	api := slack.New(slackemu.BotToken, slack.OptionAppLevelToken(slackemu.AppToken), slack.OptionAPIURL(emu.APIURL()))
	f.Fuzz(func(t *testing.T, v string) {
		if _, err := api.ListEventAuthorizations(v); err != nil {
			var se slack.SlackErrorResponse
			if !errors.As(err, &se) {
				t.Fatalf("ListEventAuthorizations(%q): %v", v, err)
			}
		}
		_, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: slackemu.ChannelGen, Timestamp: p.TS, Cursor: v})
		var se slack.SlackErrorResponse
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("GetConversationReplies(cursor %q): %v", v, err)
		}
	})
}
