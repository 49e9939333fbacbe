package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// otlpReceiver is an in-process OTLP/HTTP traces endpoint.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string
	headers http.Header
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected", http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.headers = r.Header.Clone()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				o.service = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// TestTracesExportedOverOTLP runs the whole program with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver in the test: a turn
// is one trace, an invoke_agent span with a chat span under it carrying
// the GenAI attributes, and no message content. chat.update's budget is
// tight (one edit each 500 ms) while the answer streams for over a second:
// an interim edit refused for want of budget is a slack.budget_wait span
// under the turn.
func TestTracesExportedOverOTLP(t *testing.T) {
	recv := &otlpReceiver{}
	hs := httptest.NewServer(recv)
	defer hs.Close()
	emu := slackemu.New(slackemu.Options{NoRateLimits: true})
	defer emu.Close()
	llm := llmemu.New(llmemu.Options{TokenInterval: 10 * time.Millisecond})
	defer llm.Close()
	llm.Enqueue(llmemu.Reply{Text: strings.Repeat("word ", 120)})
	env := profilesEnv(t, emu, llm, "profiles: []\n")
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = hs.URL
	env["OTEL_EXPORTER_OTLP_HEADERS"] = "x-collector-key=k%20v"
	env["OTEL_SERVICE_NAME"] = "bobbin-test"
	env["SLACK_RATE_LIMITS"] = "chat.update=120:2"
	logs, stopRun := startRun(t, env)
	var once sync.Once
	var runErr error
	stop := func() error { once.Do(func() { runErr = stopRun() }); return runErr }
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := emu.WaitFor(ctx, func() bool { return emu.LiveConnections() > 0 }); err != nil {
		t.Fatalf("bot did not connect: %v", err)
	}
	const question = "what is the SECRET-QUESTION-42?"
	emu.Mention(slackemu.TeamID, slackemu.ChannelGen, slackemu.UserAlice, question, "")
	if err := emu.WaitFor(ctx, func() bool { return strings.Contains(logs.String(), "bot: turn done") }); err != nil {
		t.Fatal("the turn did not finish")
	}
	if err := stop(); err != nil { // flushes the batch
		t.Fatalf("run: %v", err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.service != "bobbin-test" || recv.headers.Get("X-Collector-Key") != "k v" {
		t.Errorf("service %q, header %q", recv.service, recv.headers.Get("X-Collector-Key"))
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range recv.spans {
		byName[s.Name] = s
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), "SECRET-QUESTION") {
				t.Errorf("span %q carries message content in %s", s.Name, a.Key)
			}
		}
	}
	turn, chat := byName["invoke_agent bobbin"], byName["chat gpt-4o"]
	if turn == nil || chat == nil {
		var names []string
		for n := range byName {
			names = append(names, n)
		}
		t.Fatalf("spans %v, want invoke_agent bobbin and chat gpt-4o", names)
	}
	if string(chat.TraceId) != string(turn.TraceId) || string(chat.ParentSpanId) != string(turn.SpanId) {
		t.Error("the chat span is not a child of the turn span in its trace")
	}
	attrs := map[string]string{}
	ints := map[string]int64{}
	for _, a := range chat.Attributes {
		attrs[a.Key] = a.Value.GetStringValue()
		ints[a.Key] = a.Value.GetIntValue()
	}
	if attrs["gen_ai.operation.name"] != "chat" || attrs["gen_ai.request.model"] != "gpt-4o" || attrs["gen_ai.provider.name"] != "openai" ||
		ints["gen_ai.usage.input_tokens"] == 0 || ints["gen_ai.usage.output_tokens"] == 0 {
		t.Errorf("chat span attributes %v %v", attrs, ints)
	}
	// The Slack budget wait: a child of the turn, naming the method and
	// the outcome.
	if wait := byName["slack.budget_wait"]; wait == nil {
		t.Error("no slack.budget_wait span for the edits refused for want of budget")
	} else {
		attrs := map[string]string{}
		for _, a := range wait.Attributes {
			attrs[a.Key] = a.Value.GetStringValue()
		}
		if string(wait.TraceId) != string(turn.TraceId) || string(wait.ParentSpanId) != string(turn.SpanId) {
			t.Error("the budget wait span is not a child of the turn span in its trace")
		}
		if attrs["slack.method"] != "chat.update" || attrs["slack.budget.outcome"] == "" {
			t.Errorf("budget wait span attributes %v", attrs)
		}
	}
	// The final edit is part of the turn too: the edits before it spent
	// the budget, so it waits, and its wait is under the turn like the
	// interim edits'.
	finalWait := false
	for _, s := range recv.spans {
		if s.Name != "slack.budget_wait" {
			continue
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[a.Key] = a.Value.GetStringValue()
		}
		if attrs["slack.priority"] == "must" {
			finalWait = true
			if string(s.ParentSpanId) != string(turn.SpanId) {
				t.Error("a must-deliver budget wait (the final edit) is not a child of the turn span")
			}
		}
	}
	if !finalWait {
		t.Error("no must-deliver budget wait under the turn: the final edit's wait is missing from the trace")
	}
	// The turn's log lines carry its trace id.
	if !strings.Contains(logs.String(), `"trace_id":"`) {
		t.Error("no log line carries the trace id")
	}
}
