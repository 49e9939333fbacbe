package faulttest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/llmemu"
	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// full reports whether the full sizes were asked for.
func full() bool { return os.Getenv("BOBBIN_FAULT_FULL") == "1" }

// pick returns the default or, with BOBBIN_FAULT_FULL=1, the full size.
func pick[T any](def, fullSize T) T {
	if full() {
		return fullSize
	}
	return def
}

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// requireEnv skips the test when the suite cannot run here.
func requireEnv(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("fault suite: runs real bot processes (skipped with -short)")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("fault suite: redis-server is not on PATH (apt-get install redis-server)")
	}
}

// binary builds cmd/bot once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "bobbin-fault-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "bobbin")
		args := []string{"build", "-o", buildBin}
		env := os.Environ()
		if os.Getenv("BOBBIN_FAULT_RACE") == "1" {
			args = append(args, "-race")
		} else {
			// As the Dockerfile builds it (the weight figures are the
			// shipped binary's).
			args = append(args, "-trimpath", "-ldflags=-s -w")
			env = append(env, "CGO_ENABLED=0")
		}
		cmd := exec.Command("go", append(args, "./cmd/bot")...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/bot: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proc is a child process with its exit observed by one goroutine.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process (continuing it first if stopped) and waits.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	p.signal(syscall.SIGCONT)
	<-p.done
}

// wait waits up to d for the process to exit.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// redisProc is a throwaway redis-server with AOF in its own directory.
type redisProc struct {
	t    *testing.T
	port int
	dir  string
	p    *proc
}

func startRedis(t *testing.T) *redisProc {
	t.Helper()
	r := &redisProc{t: t, port: freePort(t), dir: t.TempDir()}
	for attempt := 0; !r.tryStart() && attempt < 2; attempt++ {
		r.port = freePort(t) // taken meanwhile
	}
	if r.p == nil || r.p.exited() {
		r.start() // fails the test with Redis's log
	}
	t.Cleanup(func() {
		if r.p != nil {
			r.p.kill()
		}
	})
	return r
}

func (r *redisProc) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// start runs redis-server on the same port and directory (so a restart
// replays the AOF) and waits until it answers PING.
func (r *redisProc) start() {
	r.t.Helper()
	cmd := exec.Command("redis-server", r.args()...)
	p, err := startProc(cmd)
	if err != nil {
		r.t.Fatalf("redis-server: %v", err)
	}
	r.p = p
	deadline := time.Now().Add(15 * time.Second)
	for !r.ping() {
		if p.exited() || time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			r.t.Fatalf("redis-server on port %d did not come up:\n%s", r.port, tail(string(log), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tryStart starts Redis and reports whether it answers.
func (r *redisProc) tryStart() bool {
	cmd := exec.Command("redis-server", r.args()...)
	p, err := startProc(cmd)
	if err != nil {
		return false
	}
	r.p = p
	if poll(15*time.Second, func() bool { return p.exited() || r.ping() }) && !p.exited() {
		return true
	}
	p.kill()
	return false
}

func (r *redisProc) args() []string {
	return []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--logfile", filepath.Join(r.dir, "redis.log"), "--daemonize", "no"}
}

// stop shuts Redis down gracefully (SIGTERM: the AOF is flushed).
func (r *redisProc) stop() {
	r.p.signal(syscall.SIGTERM)
	if !r.p.wait(15 * time.Second) {
		r.p.kill()
	}
}

// ping speaks just enough RESP to ask PING.
func (r *redisProc) ping() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// cluster is the emulated world: Slack, the model, Redis and the replicas.
type cluster struct {
	t     *testing.T
	emu   *slackemu.Server
	llm   *llmemu.Server
	redis *redisProc
	bin   string
	env   map[string]string

	mu       sync.Mutex
	replicas []*replica
	seq      int
}

type clusterOpts struct {
	emu slackemu.Options
	// env overrides replica environment variables.
	env map[string]string
	// words is the answer length in words; interval the pause per token.
	words    int
	interval time.Duration
	// strict keeps the emulator's default (Slack's) rate limits and the
	// bots' own governor on, as in production.
	strict bool
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	requireEnv(t)
	bin := binary(t)
	o.emu.NoRateLimits = !o.strict
	o.emu.MessageEventsOnMention = true
	emu := slackemu.New(o.emu)
	t.Cleanup(emu.Close)
	llm := llmemu.New(llmemu.Options{TokenInterval: o.interval})
	t.Cleanup(llm.Close)
	words := max(o.words, 8)
	llm.SetResponder(func(req llmemu.Recorded) llmemu.Reply {
		return llmemu.Reply{Text: answer(msgID(req.LastUserText()), words)}
	})
	c := &cluster{t: t, emu: emu, llm: llm, redis: startRedis(t), bin: bin}
	c.env = map[string]string{
		"SLACK_BOT_TOKEN":          slackemu.BotToken,
		"SLACK_APP_TOKEN":          slackemu.AppToken,
		"SLACK_API_URL":            emu.APIURL(),
		"REDIS_URL":                c.redis.url(),
		"LLM_PROVIDER":             "openai",
		"LLM_BASE_URL":             llm.URL() + "/v1",
		"LLM_API_KEY":              "sk-fault",
		"LLM_MODEL":                "gpt-4o",
		"LEASE_TTL":                "5s",
		"SHUTDOWN_GRACE":           "8s",
		"STREAM_EDIT_INTERVAL":     "300ms",
		"SLACK_UPDATES_PER_MINUTE": "100000",
		// The emulator runs without rate limits here; so does the
		// bots' governor (the fault suite is about reliability).
		"SLACK_RATE_LIMITS":     "*=off",
		"USER_TURNS_PER_MINUTE": "100000",
		"MAX_CONCURRENT_TURNS":  "64",
		"LOG_LEVEL":             "info",
		"LOG_FORMAT":            "json",
	}
	if o.strict {
		for _, k := range []string{"SLACK_UPDATES_PER_MINUTE", "SLACK_RATE_LIMITS", "USER_TURNS_PER_MINUTE"} {
			delete(c.env, k)
		}
	}
	for k, v := range o.env {
		if v == "" {
			delete(c.env, k) // unset it
			continue
		}
		c.env[k] = v
	}
	t.Cleanup(c.killAll)
	return c
}

// replica is one bot process.
type replica struct {
	name string
	addr string // HTTP_ADDR
	log  string // path of its stdout+stderr
	p    *proc
}

// start runs a new replica and waits until /readyz answers 200.
func (c *cluster) start() *replica {
	c.t.Helper()
	return c.startAt("")
}

// startAt is start on a given HTTP address ("" = a free port), for a
// replica whose address must be known before it runs (PUBLIC_URL).
func (c *cluster) startAt(addr string) *replica {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		r := c.launchAt(addr)
		ok := poll(30*time.Second, func() bool { return r.p.exited() || r.ready() })
		switch {
		case ok && !r.p.exited():
			return r
		case r.p.exited() && addr == "" && attempt < 2 && r.logLines("address already in use") > 0:
			continue // freePort's port was taken meanwhile
		case r.p.exited():
			c.t.Fatalf("replica %s exited: %v\n%s", r.name, r.p.err, r.logTail(30))
		default:
			c.t.Fatalf("replica %s not ready after 30s\n%s", r.name, r.logTail(30))
		}
	}
}

// launch runs a new replica without waiting for it.
func (c *cluster) launch() *replica {
	c.t.Helper()
	return c.launchAt("")
}

// launchAt is launch on a given HTTP address ("" = a free port).
func (c *cluster) launchAt(addr string) *replica {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	name := fmt.Sprintf("r%d", c.seq)
	c.mu.Unlock()
	if addr == "" {
		addr = fmt.Sprintf("127.0.0.1:%d", freePort(c.t))
	}
	r := &replica{name: name, addr: addr, log: filepath.Join(c.t.TempDir(), name+".log")}
	f, err := os.Create(r.log)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(c.bin)
	cmd.Env = []string{"HTTP_ADDR=" + r.addr, "TMPDIR=" + os.TempDir()}
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if g := os.Getenv("GORACE"); g != "" {
		cmd.Env = append(cmd.Env, "GORACE="+g)
	}
	cmd.Stdout, cmd.Stderr = f, f
	r.p, err = startProc(cmd)
	if err != nil {
		c.t.Fatalf("starting %s: %v", c.bin, err)
	}
	c.mu.Lock()
	c.replicas = append(c.replicas, r)
	c.mu.Unlock()
	return r
}

// killAll SIGKILLs every replica still running (test cleanup); a test
// that failed gets the tail of each replica's log.
func (c *cluster) killAll() {
	c.mu.Lock()
	rs := slices.Clone(c.replicas)
	c.mu.Unlock()
	for _, r := range rs {
		r.p.kill()
		if r.logLines("WARNING: DATA RACE") > 0 {
			c.t.Errorf("replica %s reported a data race (BOBBIN_FAULT_RACE=1)", r.name)
		}
		if c.t.Failed() {
			c.t.Logf("--- log of %s (last lines) ---\n%s", r.name, r.logTail(25))
		}
	}
}

func (r *replica) ready() bool {
	resp, err := http.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metric reads one unlabelled metric from /metrics (-1 when unreadable).
func (r *replica) metric(name string) float64 {
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// logLines counts log lines containing s.
func (r *replica) logLines(s string) int {
	data, _ := os.ReadFile(r.log)
	return bytes.Count(data, []byte(s))
}

func (r *replica) logTail(n int) string {
	data, _ := os.ReadFile(r.log)
	return tail(string(data), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every 100 ms until it holds or d passes (then the
// test fails with what).
func (c *cluster) waitFor(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	if !poll(d, cond) {
		c.t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Messages carry an id ("msg-<n>") the model echoes in its answer, so the
// test can tell answers apart and count them.
var msgIDRe = regexp.MustCompile(`msg-[0-9]+`)

func msgID(text string) string { return msgIDRe.FindString(text) }

// answer is the scripted answer to message id: "Answer to <id>:", words
// of filler, "End of <id>." (the marker of a complete answer).
func answer(id string, words int) string {
	var b strings.Builder
	b.WriteString("Answer to " + id + ":")
	filler := []string{"alpha", "bravo", "delta", "gamma", "kilo", "lima", "mike", "oscar"}
	for i := range words {
		b.WriteString(" " + filler[i%len(filler)])
	}
	b.WriteString(" End of " + id + ".")
	return b.String()
}

// threadState is what a person sees in one thread.
type threadState struct {
	complete    map[string]int // message id → messages showing its complete answer
	live        int            // bot messages still streaming or showing Stop
	interrupted []slackemu.Message
	bot         []slackemu.Message
}

// threads reads a whole channel once and returns each thread's state by
// thread ts (cheaper than thread() per thread when there are thousands).
func (c *cluster) threads(channel string) map[string]threadState {
	byThread := map[string][]slackemu.Message{}
	for _, m := range c.emu.Messages(channel) {
		if m.IsBot() && m.ThreadTS != "" && m.TS != m.ThreadTS {
			byThread[m.ThreadTS] = append(byThread[m.ThreadTS], m)
		}
	}
	out := make(map[string]threadState, len(byThread))
	for ts, ms := range byThread {
		out[ts] = stateOf(ms)
	}
	return out
}

func stateOf(msgs []slackemu.Message) threadState {
	st := threadState{complete: map[string]int{}}
	for _, m := range msgs {
		if m.Deleted || bytes.Contains(m.Blocks, []byte("bobbin_sign")) {
			// A sign of life's placeholder (block bot.SignBlockID) is
			// not the reply: it is deleted once the reply shows (one
			// posted just before a replica died stays; its text stays
			// true).
			continue
		}
		st.bot = append(st.bot, m)
		text := m.Visible()
		for _, id := range msgIDRe.FindAllString(text, -1) {
			if strings.Contains(text, "End of "+id+".") && strings.Contains(text, "Answer to "+id+":") {
				st.complete[id]++
				break
			}
		}
		if m.Streaming || bytes.Contains(m.Blocks, []byte("bobbin_stop")) {
			st.live++
		}
		if strings.Contains(text, "was interrupted") {
			st.interrupted = append(st.interrupted, m)
		}
	}
	return st
}

// settled reports whether every envelope was acked or given up on by
// Slack (retries exhausted, or an interaction that timed out).
func (c *cluster) settled() bool {
	for _, e := range c.emu.Envelopes() {
		if !e.Acked && !e.Failed {
			return false
		}
	}
	return true
}

// llmCalls counts model requests per message id.
func (c *cluster) llmCalls() map[string]int {
	out := map[string]int{}
	for _, r := range c.llm.Requests() {
		out[msgID(r.LastUserText())]++
	}
	return out
}

// durations summary: p50, p95, p99, max (nearest rank).
type summary struct{ n, p50, p95, p99, max time.Duration }

func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return summary{n: time.Duration(len(s)), p50: rank(0.5), p95: rank(0.95), p99: rank(0.99), max: s[len(s)-1]}
}

func (s summary) String() string {
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("n=%d p50=%s p95=%s p99=%s max=%s", int(s.n), r(s.p50), r(s.p95), r(s.p99), r(s.max))
}

// report logs a scenario's figures and prints one summary line.
func report(t *testing.T, scenario string, kv ...any) {
	t.Helper()
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	t.Logf("FAULT %s:%s", scenario, b.String())
	fmt.Printf("FAULT %s:%s\n", scenario, b.String())
}
