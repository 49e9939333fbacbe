package faulttest

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// TestWeight measures the process's weight (issue 23): idle RSS, peak RSS
// under 10 concurrent turns in 10 channels, and the time from process
// start to its Socket Mode connection, with an external Redis and with
// the embedded one (REDIS_URL unset). It asserts nothing about the
// figures (they depend on the machine): it reports them, one line per
// round; BOBBIN_WEIGHT_ROUNDS sets the rounds (default 1).
func TestWeight(t *testing.T) {
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("BOBBIN_WEIGHT_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for _, redis := range []string{"external", "embedded"} {
		t.Run(redis, func(t *testing.T) {
			var idle, peak, connect []float64
			for round := range rounds {
				w := measureWeight(t, redis == "embedded")
				report(t, "weight", "redis", redis, "round", round+1, "idle_rss_mib", mib(w.idle),
					"peak_rss_mib", mib(w.peak), "start_to_connected_ms", w.connect.Milliseconds(),
					"answered", w.answered, "idle", "{"+w.idleDetail+"}", "after_turns", "{"+w.afterDetail+"}")
				if !w.answered {
					t.Errorf("round %d: not every one of the 10 mentions was answered", round+1)
				}
				idle = append(idle, mib(w.idle))
				peak = append(peak, mib(w.peak))
				connect = append(connect, float64(w.connect.Milliseconds()))
			}
			report(t, "weight-summary", "redis", redis, "rounds", rounds,
				"idle_rss_mib", spread(idle), "peak_rss_mib", spread(peak), "start_to_connected_ms", spread(connect))
		})
	}
}

type weight struct {
	idle, peak int64 // bytes
	connect    time.Duration
	answered   bool
	// idleDetail and afterDetail break RSS down (anonymous vs file pages,
	// the Go heap and stacks) at idle and after the turns.
	idleDetail, afterDetail string
}

// detail breaks a replica's memory down, in MiB.
func detail(t *testing.T, r *replica) string {
	m := func(v float64) float64 { return mib(int64(v)) }
	return fmt.Sprintf("anon=%.1f file=%.1f binary=%s heap_inuse=%.1f heap_sys=%.1f heap_released=%.1f stack=%.1f goroutines=%.0f cpu_ms=%d gc_cycles=%.0f",
		mib(procStatus(t, r, "RssAnon")), mib(procStatus(t, r, "RssFile")), binaryRSS(r),
		m(r.metric("go_memstats_heap_inuse_bytes")), m(r.metric("go_memstats_heap_sys_bytes")),
		m(r.metric("go_memstats_heap_released_bytes")), m(r.metric("go_memstats_stack_inuse_bytes")), r.metric("go_goroutines"),
		procCPU(r.p.cmd.Process.Pid).Milliseconds(), r.metric("go_gc_duration_seconds_count"))
}

func measureWeight(t *testing.T, embedded bool) weight {
	env := map[string]string{"MAX_CONCURRENT_TURNS": "16"}
	// BOBBIN_WEIGHT_GOGC sets the replicas' GOGC (unset: the program's
	// default), to compare.
	if g := os.Getenv("BOBBIN_WEIGHT_GOGC"); g != "" {
		env["GOGC"] = g
	}
	if embedded {
		env["REDIS_URL"] = ""
	}
	c := newCluster(t, clusterOpts{words: 60, interval: 100 * time.Millisecond, env: env})
	channels := make([]string, 10)
	for i := range channels {
		channels[i] = fmt.Sprintf("CW%03d", i)
		c.emu.AddChannel(slackemu.TeamID, slackemu.Channel{ID: channels[i], Name: fmt.Sprintf("weight-%d", i), BotMember: true})
	}
	began := time.Now()
	r := c.start()
	var w weight
	for _, ci := range c.emu.Connections() {
		if w.connect == 0 || ci.OpenedAt.Sub(began) < w.connect {
			w.connect = ci.OpenedAt.Sub(began)
		}
	}
	// Idle: after start-up settles (background loads included).
	time.Sleep(5 * time.Second)
	w.idle = procStatus(t, r, "VmRSS")
	w.idleDetail = detail(t, r)

	roots := map[string][2]string{}
	for i, ch := range channels {
		id := fmt.Sprintf("msg-%d", i+1)
		roots[id] = [2]string{ch, c.emu.Mention(slackemu.TeamID, ch, slackemu.UserAlice, "please answer "+id, "").TS}
	}
	w.answered = poll(60*time.Second, func() bool {
		for id, at := range roots {
			st := stateOf(c.emu.BotReplies(at[0], at[1]))
			if st.complete[id] == 0 || st.live > 0 {
				return false
			}
		}
		return true
	})
	w.peak = procStatus(t, r, "VmHWM")
	w.afterDetail = detail(t, r)
	r.p.kill()
	return w
}

// procStatus reads one "kB" field of /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, r *replica, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/<pid>/status has no %s", field)
	return 0
}

func mib(b int64) float64 { return float64(b*10>>20) / 10 }

// spread formats the median and the range of xs.
func spread(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("median=%.1f[%.1f..%.1f]", med, s[0], s[len(s)-1])
}

// binaryRSS sums the resident pages of the executable's mappings by
// permissions (r-xp: code, r--p: read-only data and the pcln table).
func binaryRSS(r *replica) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", r.p.cmd.Process.Pid))
	if err != nil {
		return "?"
	}
	byPerm := map[string]int64{}
	var perms []string
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 6 && strings.Contains(f[0], "-") && strings.HasSuffix(f[5], "bobbin"):
			cur = f[1]
			if _, ok := byPerm[cur]; !ok {
				perms = append(perms, cur)
			}
		case len(f) >= 2 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			cur = ""
		case cur != "" && f[0] == "Rss:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			byPerm[cur] += kb << 10
		}
	}
	var out []string
	for _, p := range perms {
		out = append(out, fmt.Sprintf("%s:%.1f", p, mib(byPerm[p])))
	}
	return strings.Join(out, ",")
}
