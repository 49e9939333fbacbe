package llmemu_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
)

// streamText posts one chat request and returns the streamed text; a real
// test would use provider/openai or provider/anthropic instead.
func streamText(c *http.Client, url, key string, anthropic bool, body string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if anthropic {
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Delta struct{ Text string } `json:"delta"`
		}
		_ = json.Unmarshal([]byte(data), &ev)
		for _, ch := range ev.Choices {
			text.WriteString(ch.Delta.Content)
		}
		text.WriteString(ev.Delta.Text)
	}
	return text.String()
}

// A test scripts the model's turns, points the code under test at URL()
// (OpenAI base URL: URL()+"/v1"), then checks what the model was sent.
func Example() {
	srv := llmemu.New(llmemu.Options{APIKey: "sk-test", TokenInterval: time.Millisecond})
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	srv.Enqueue(llmemu.Reply{Text: "Hello from a scripted turn."})
	fmt.Println(streamText(c, srv.URL()+"/v1/chat/completions", "sk-test", false,
		`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))

	// With the queue empty, the default reply echoes the last user message.
	fmt.Println(streamText(c, srv.URL()+"/v1/chat/completions", "sk-test", false,
		`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"thread 7"}]}`))

	for _, r := range srv.Requests() {
		fmt.Println(r.Seq, r.Protocol, r.Status, r.LastUserText(), r.Header.Get("Authorization"))
	}
	// Output:
	// Hello from a scripted turn.
	// You said: thread 7. This is a scripted answer from llmemu.
	// 1 openai 200 hi [redacted]
	// 2 openai 200 thread 7 [redacted]
}

// A responder answers from the request: here, call a tool first, then
// answer with the tool's result.
func ExampleServer_SetResponder() {
	srv := llmemu.New(llmemu.Options{})
	defer srv.Close()
	srv.SetResponder(func(req llmemu.Recorded) llmemu.Reply {
		if last := req.LastMessage(); last.Role == "tool" {
			return llmemu.Reply{Text: "It is " + last.Text + "."}
		}
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	fmt.Println(streamText(c, srv.URL()+"/v1/messages", "", true, `{"model":"claude","max_tokens":100,"stream":true,
		"messages":[{"role":"user","content":"weather?"},
		 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
		 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]}`))
	// Output: It is sunny.
}

// Fault tests: fail requests before the first byte, or park streams
// mid-way to kill the client while a turn is streaming.
func ExampleServer_Hold() {
	srv := llmemu.New(llmemu.Options{})
	defer srv.Close()
	ctx := context.Background()

	srv.FailNext(2, llmemu.ErrorReply{Status: 529}) // two overloaded answers, then normal replies
	release := srv.Hold(3)                          // streams park after 3 deltas
	defer release()

	// … start the bot against srv.URL() and mention it …
	_ = srv.WaitHeld(ctx, 1)     // a turn is mid-stream
	_ = srv.WaitInFlight(ctx, 0) // after killing the bot: its stream ended
}
