package slackemu_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

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
