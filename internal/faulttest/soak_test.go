package faulttest

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
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

var (
	soakFlag     = flag.Duration("soak", 0, "TestSoak's traffic duration (e.g. 30m); 0: the short CI version (75 s), or 30m with BOBBIN_FAULT_FULL=1")
	soakRate     = flag.Float64("soak-rate", 0, "TestSoak's mentions per second (0: 0.2 for the CI version, 0.3 for a long one)")
	soakRestarts = flag.Duration("soak-restart", 0, "TestSoak's period between restarts of replica B (0: 30 s for the CI version, 5m for a long one)")
	soakSpaces   = flag.Int("soak-workspaces", 1, "TestSoak's workspaces: 1 is one workspace with a pinned bot token; N > 1 spreads the channels over N workspaces installed through the OAuth v2 flow (a long run's default rate is then 5/s)")
)

// soakChannels is how many channels the mentions are spread over.
const soakChannels = 20

// soakSample is one row of the soak's curves.
type soakSample struct {
	at                   time.Duration
	rssA, rssB           int64 // bytes; 0 when not running
	goA, goB             float64
	liveSockets          int
	keys, persistentKeys int
	sent, answered       int
	rateLimited          int
}

// TestSoak (issue 23): two replicas of the whole program, a real Redis,
// the Slack emulator with Slack's default limits, mentions across 20
// channels each needing an approved tool call, replica B restarted
// (SIGTERM, then a new process) periodically. Wants: every mention
// answered exactly once and its tool never run twice, no 429 from Slack,
// replica A's RSS and goroutines flat after warm-up (≤ 10 % growth),
// Redis keys without a TTL not growing, no Socket Mode connection
// leaked. The curves are written as CSV and PNG to the test's artifact
// directory (go test -artifacts keeps them).
//
// By default all channels are in one workspace (a pinned bot token),
// whose chat.update budget (Tier 3, 50 a minute) sustains about 0.3
// mentions a second. -soak-workspaces N spreads the channels over N
// workspaces, each installed through the program's OAuth v2 flow (with
// PUBLIC_URL on replica A, which is never restarted) and each with its
// own Slack budgets, as a deployment serving 5 mentions a second across
// many workspaces is; the mentions go round-robin over the channels, so
// each workspace sees rate/N. The figures include CPU used per second
// of traffic by the replicas, Redis and the test process (the emulators
// and the clicker), to tell whether the machine kept up.
//
// The default is a short version for CI; the long ones (one workspace at
// 0.3/s; 20 workspaces, one channel each, at the 5/s):
//
//	go test -run TestSoak -timeout=45m -artifacts -outputdir $PWD/out ./internal/faulttest -soak=30m
//	go test -run TestSoak -timeout=45m -artifacts -outputdir $PWD/out ./internal/faulttest -soak=30m -soak-workspaces=20
func TestSoak(t *testing.T) {
	requireEnv(t)
	spaces := max(*soakSpaces, 1)
	dur, rate, restartEvery := 75*time.Second, 0.2, 30*time.Second
	long := *soakFlag >= 10*time.Minute || (*soakFlag == 0 && full())
	if long {
		dur, rate, restartEvery = 30*time.Minute, 0.3, 5*time.Minute
		if spaces > 1 {
			// Slack's budgets are per workspace: the rate,
			// rate/N in each.
			rate = 5
		}
	}
	dur = cmpOr(*soakFlag, dur)
	rate = cmpOr(*soakRate, rate)
	restartEvery = cmpOr(*soakRestarts, restartEvery)
	sampleEvery := max(dur/60, 2*time.Second)
	warmup := dur * 4 / 10

	act := newActServer(t)
	cfgPath := filepath.Join(t.TempDir(), "mcp.yaml")
	if err := os.WriteFile(cfgPath, []byte("servers:\n  - name: ops\n    url: "+act.url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := clusterOpts{strict: true, interval: 20 * time.Millisecond, env: map[string]string{
		"MCP_CONFIG": cfgPath, "MCP_ALLOW_PRIVATE_NETWORKS": "true",
		// A per-person limit, not Slack's: one person mentions here.
		"USER_TURNS_PER_MINUTE": "100000",
	}}
	// Where each channel lies and who asks there: Alice in the one
	// workspace of the pinned token, or in each of the installed ones,
	// whose PUBLIC_URL is replica A (never restarted).
	places := make([]soakPlace, soakChannels)
	for i := range places {
		places[i] = soakPlace{team: slackemu.TeamID, user: slackemu.UserAlice}
	}
	var teams []slackemu.Team
	addrA := ""
	if spaces > 1 {
		addrA = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		teams, places = soakTeams(spaces, soakChannels)
		oauth, env := installOpts(addrA)
		opts.emu = slackemu.Options{Teams: teams, OAuth: oauth}
		maps.Copy(opts.env, env)
	}
	c := newCluster(t, opts)
	if spaces > 1 {
		c.env["SLACK_OAUTH_AUTHORIZE_URL"] = c.emu.AuthorizeURL()
	}
	c.llm.SetResponder(func(req llmemu.Recorded) llmemu.Reply {
		id := msgID(req.LastUserText())
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
			return llmemu.Reply{Text: answer(id, 8)}
		}
		name := ""
		for _, tn := range req.Tools {
			if strings.HasSuffix(tn, "act") {
				name = tn
			}
		}
		return llmemu.Reply{ToolCalls: []llmemu.ToolCall{{Name: name, Arguments: `{"id":"` + id + `"}`}}}
	})
	channels := make([]string, soakChannels)
	for i := range channels {
		channels[i] = fmt.Sprintf("CS%03d", i)
		c.emu.AddChannel(places[i].team, slackemu.Channel{ID: channels[i], Name: fmt.Sprintf("soak-%d", i), BotMember: true})
	}

	a := c.startAt(addrA)
	var mu sync.Mutex
	b := c.start()
	replicaB := func() *replica { mu.Lock(); defer mu.Unlock(); return b }
	if spaces > 1 {
		installAll(t, c.emu, "http://"+addrA, teams)
	}

	type root struct{ channel, ts string }
	var (
		rootsMu  sync.Mutex
		roots    = map[string]root{}
		stop     = make(chan struct{})
		bg       sync.WaitGroup
		samples  []soakSample
		restarts int
		passes   []time.Duration // of the clicker, during the traffic
		began    = time.Now()
		cpu0     = c.cpu()
	)
	snapshot := func() map[string]root {
		rootsMu.Lock()
		defer rootsMu.Unlock()
		out := make(map[string]root, len(roots))
		for k, v := range roots {
			out[k] = v
		}
		return out
	}
	answeredCount := func(rs map[string]root) (answered, duplicates, lost int) {
		byChannel := map[string]map[string]threadState{}
		for id, r := range rs {
			if byChannel[r.channel] == nil {
				byChannel[r.channel] = c.threads(r.channel)
			}
			switch st := byChannel[r.channel][r.ts]; {
			case st.complete[id] == 0 || st.live > 0:
				lost++
			default:
				answered++
				duplicates += st.complete[id] - 1
			}
		}
		return answered, duplicates, lost
	}

	// Mentions, round-robin over the channels.
	bg.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("msg-%d", n)
			ch, pl := channels[n%len(channels)], places[n%len(channels)]
			p := c.emu.Mention(pl.team, ch, pl.user, "please act on "+id, "")
			rootsMu.Lock()
			roots[id] = root{ch, p.TS}
			rootsMu.Unlock()
		}
	})
	// The person clicks "Allow once" on every prompt; again when a prompt
	// still shows its buttons 10 s later (a turn handed over to the other
	// replica asks again).
	clicked := map[string][]time.Time{}
	clicks := 0
	clicker := func() {
		for i, ch := range channels {
			for _, m := range c.emu.Messages(ch) {
				if !m.IsBot() || m.Deleted || !bytes.Contains(m.Blocks, []byte("bobbin_allow_once")) {
					continue
				}
				prev := clicked[m.TS]
				if len(prev) >= 5 || (len(prev) > 0 && time.Since(prev[len(prev)-1]) < 10*time.Second) {
					continue
				}
				if _, err := c.emu.Click(places[i].team, places[i].user, ch, m.TS, "bobbin_allow_once", ""); err == nil {
					clicked[m.TS] = append(prev, time.Now())
					clicks++
				}
			}
		}
	}
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			start := time.Now()
			clicker()
			passes = append(passes, time.Since(start))
		}
	})
	// Replica B is restarted periodically.
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(restartEvery):
			}
			old := replicaB()
			old.p.signal(syscall.SIGTERM)
			if !old.p.wait(30 * time.Second) {
				t.Errorf("replica %s did not exit within 30 s of SIGTERM", old.name)
				old.p.kill()
			}
			nb := c.start()
			mu.Lock()
			b = nb
			restarts++
			mu.Unlock()
		}
	})
	sample := func() soakSample {
		s := soakSample{at: time.Since(began), liveSockets: c.emu.LiveConnections()}
		s.rssA, s.goA = rssOf(a), a.metric("go_goroutines")
		if rb := replicaB(); !rb.p.exited() {
			s.rssB, s.goB = rssOf(rb), rb.metric("go_goroutines")
		}
		s.keys, s.persistentKeys = c.redis.keyCounts()
		rs := snapshot()
		s.sent = len(rs)
		s.answered, _, _ = answeredCount(rs)
		for _, n := range c.emu.RateLimited() {
			s.rateLimited += n
		}
		return s
	}
	for time.Since(began) < dur {
		time.Sleep(sampleEvery)
		samples = append(samples, sample())
	}
	close(stop)
	bg.Wait()
	traffic, cpu1 := time.Since(began), c.cpu()

	all := snapshot()
	drained := poll(120*time.Second, func() bool {
		clicker()
		_, _, lost := answeredCount(all)
		return lost == 0
	})
	c.waitFor("every envelope acked or given up", 60*time.Second, c.settled)
	// Leases and approvals of the last turns expire; then the quiet state.
	time.Sleep(6 * time.Second)
	samples = append(samples, sample())
	final := samples[len(samples)-1]

	answered, duplicates, lost := answeredCount(all)
	runs := act.executions()
	twice, never := 0, 0
	for id, r := range all {
		switch n := runs[id]; {
		case n > 1:
			twice++
			t.Errorf("%s (channel %s, thread %s): the approved tool ran %d times, want once", id, r.channel, r.ts, n)
		case n == 0:
			never++
			// Every mention's tool is approved ("Allow once"), also when the
			// click races the asking replica's shutdown: the turn is handed
			// over with the call unanswered and the replica that resumes it
			// takes the click (agent.ErrHandOver, ask's resume).
			t.Errorf("%s (channel %s, thread %s): answered, but the approved tool never ran", id, r.channel, r.ts)
		}
	}
	limited := c.emu.RateLimited() // over all workspaces
	stats := c.emu.ConnStats()
	live := c.emu.LiveConnections()

	// Flat after warm-up: the first window after warm-up against the last
	// window of traffic.
	early, late := windows(samples[:len(samples)-1], warmup)
	rssEarly, rssLate := median(early, func(s soakSample) float64 { return float64(s.rssA) }), median(late, func(s soakSample) float64 { return float64(s.rssA) })
	// Goroutines: the floor of each window (turns in flight add a few
	// for a moment; a leak raises the floor).
	goEarly, goLate := floor(early, func(s soakSample) float64 { return s.goA }), floor(late, func(s soakSample) float64 { return s.goA })
	persistEarly := median(early, func(s soakSample) float64 { return float64(s.persistentKeys) })

	csvPath, pngPath := writeSoakCurves(t, samples)
	defer func() {
		if t.Failed() {
			data, _ := os.ReadFile(csvPath)
			t.Logf("soak curves:\n%s", data)
		}
	}()
	report(t, "soak", "duration", dur, "rate_per_s", rate, "workspaces", spaces, "channels", soakChannels, "restarts_of_b", restarts,
		"mentions", len(all), "sent_per_s", fmt.Sprintf("%.2f", float64(len(all))/traffic.Seconds()), "answered", answered, "lost", lost, "duplicate_replies", duplicates,
		"tool_ran_twice", twice, "tool_never_ran", never, "clicks", clicks, "drained", drained,
		"rate_limited", fmt.Sprint(limited), "rss_a_mib", fmt.Sprintf("%.1f→%.1f", rssEarly/(1<<20), rssLate/(1<<20)),
		"goroutines_a", fmt.Sprintf("%.0f→%.0f", goEarly, goLate),
		"redis_keys_end", final.keys, "persistent_keys", fmt.Sprintf("%.0f→%d", persistEarly, final.persistentKeys),
		"live_sockets_end", live, "max_live_sockets", stats.MaxLive, "sockets_opened", stats.Opened,
		"cpu_per_s", cpu1.sub(cpu0).per(traffic), "load", loadAvg(), "cores", runtime.NumCPU(),
		"clicker_pass_ms", passSummary(passes), "test_rss_mib", fmt.Sprintf("%.0f", float64(rssPid(os.Getpid()))/(1<<20)),
		"csv", csvPath, "png", pngPath)

	if lost != 0 || duplicates != 0 {
		t.Errorf("lost=%d duplicate replies=%d over %d mentions; want 0", lost, duplicates, len(all))
	}
	if len(limited) != 0 {
		t.Errorf("the emulator answered 429 to %v (by workspace: %v); want none", limited, limitedByTeam(c.emu))
	}
	if len(early) > 0 && len(late) > 0 {
		if rssLate > 1.10*rssEarly {
			t.Errorf("replica A's RSS grew from %.1f to %.1f MiB after warm-up (> 10 %%)", rssEarly/(1<<20), rssLate/(1<<20))
		}
		if goLate > 1.10*goEarly {
			t.Errorf("replica A's goroutines grew from %.0f to %.0f after warm-up (> 10 %%)", goEarly, goLate)
		}
		if float64(final.persistentKeys) > 1.10*persistEarly+1 {
			t.Errorf("Redis keys without a TTL grew from %.0f to %d: %v", persistEarly, final.persistentKeys, c.redis.persistentKeys())
		}
	}
	// One socket per replica (SOCKET_CONNECTIONS=1), one more during a
	// restart's overlap at most; none left behind by the restarted ones.
	if live != 2 || stats.MaxLive > 3 {
		t.Errorf("%d Socket Mode connections live at the end (want 2), at most %d at once (want ≤ 3)", live, stats.MaxLive)
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// windows returns the samples of the first and the last window of equal
// length after warm-up (a sixth of the traffic each, at least 3 samples).
func windows(s []soakSample, warmup time.Duration) (early, late []soakSample) {
	var after []soakSample
	for _, x := range s {
		if x.at >= warmup {
			after = append(after, x)
		}
	}
	n := max(len(s)/6, 3)
	if len(after) < 2*n {
		return nil, nil
	}
	return after[:n], after[len(after)-n:]
}

func floor(s []soakSample, f func(soakSample) float64) float64 {
	lo := 0.0
	for i, x := range s {
		if v := f(x); i == 0 || v < lo {
			lo = v
		}
	}
	return lo
}

func median(s []soakSample, f func(soakSample) float64) float64 {
	if len(s) == 0 {
		return 0
	}
	v := make([]float64, len(s))
	for i, x := range s {
		v[i] = f(x)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// rssOf reads a replica's VmRSS (0 when it is gone).
func rssOf(r *replica) int64 { return rssPid(r.p.cmd.Process.Pid) }

// rssPid reads a process's VmRSS (0 when it is gone).
func rssPid(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuUse is CPU time (user + system) used so far by every replica run,
// by Redis, and by the test process (the emulators, the clicker).
type cpuUse struct{ bots, redis, test time.Duration }

func (c *cluster) cpu() cpuUse {
	c.mu.Lock()
	rs := slices.Clone(c.replicas)
	c.mu.Unlock()
	var u cpuUse
	for _, r := range rs {
		if r.p.exited() {
			u.bots += r.p.cmd.ProcessState.UserTime() + r.p.cmd.ProcessState.SystemTime()
		} else {
			u.bots += procCPU(r.p.cmd.Process.Pid)
		}
	}
	u.redis = procCPU(c.redis.p.cmd.Process.Pid)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.test = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return u
}

func (u cpuUse) sub(v cpuUse) cpuUse {
	return cpuUse{bots: u.bots - v.bots, redis: u.redis - v.redis, test: u.test - v.test}
}

// per formats the use as cores busy over d.
func (u cpuUse) per(d time.Duration) string {
	f := func(x time.Duration) float64 { return x.Seconds() / d.Seconds() }
	return fmt.Sprintf("bots=%.2f,redis=%.2f,test=%.2f", f(u.bots), f(u.redis), f(u.test))
}

// procCPU reads a running process's utime + stime from /proc (0 when it
// is gone).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(data, ')')
	if err != nil || i < 0 {
		return 0
	}
	// After the command name: state (field 3) … utime (14), stime (15),
	// in clock ticks (100 a second on Linux).
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// loadAvg is the machine's 1-minute load average ("?" when unknown).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// passSummary formats the clicker's pass durations as p50/max in ms.
func passSummary(ds []time.Duration) string {
	s := summarize(ds)
	return fmt.Sprintf("%d/%d", s.p50.Milliseconds(), s.max.Milliseconds())
}

// keyCounts returns the number of keys and of keys without a TTL (-1 on
// an error).
func (r *redisProc) keyCounts() (all, persistent int) {
	reply, err := r.eval(`local n = 0
local ks = redis.call('KEYS', '*')
for _, k in ipairs(ks) do if redis.call('TTL', k) == -1 then n = n + 1 end end
return {#ks, n}`)
	if err != nil || len(reply) != 2 {
		return -1, -1
	}
	all, _ = strconv.Atoi(reply[0])
	persistent, _ = strconv.Atoi(reply[1])
	return all, persistent
}

// persistentKeys lists the keys without a TTL (for a failure message).
func (r *redisProc) persistentKeys() []string {
	ks, _ := r.eval(`local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do if redis.call('TTL', k) == -1 then out[#out+1] = k end end
return out`)
	slices.Sort(ks)
	return ks
}

// eval runs a script (no keys) and returns its flat array reply, speaking
// just enough RESP.
func (r *redisProc) eval(script string) ([]string, error) {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	cmd := fmt.Sprintf("*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n", len(script), script)
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return nil, err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("redis: %s", strings.TrimSpace(line))
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	out := make([]string, 0, n)
	for range n {
		item, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		switch item[0] {
		case ':':
			out = append(out, strings.TrimSpace(item[1:]))
		case '$':
			size, _ := strconv.Atoi(strings.TrimSpace(item[1:]))
			buf := make([]byte, size+2)
			if _, err := io.ReadFull(rd, buf); err != nil {
				return nil, err
			}
			out = append(out, string(buf[:size]))
		}
	}
	return out, nil
}
