package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bobbinbot/bobbin/bot"
)

// The README is the operator's manual; these tests keep the parts that
// follow from the code in step with it.

func readme(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// recordingRegisterer keeps what is registered on it.
type recordingRegisterer struct{ cs []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.cs = append(r.cs, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) { r.cs = append(r.cs, cs...) }

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

// botMetrics are the names of every metric the bot registers.
func botMetrics(t *testing.T) []string {
	t.Helper()
	var rec recordingRegisterer
	bot.NewMetrics(&rec)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for _, c := range rec.cs {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fq.FindStringSubmatch(d.String()); m != nil {
				names = append(names, m[1])
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d metrics: the registry walk is broken", len(names))
	}
	return names
}

// TestReadmeListsEveryMetric: every metric /metrics exports is in the
// README, and every bobbin_ metric the README mentions (alerts included)
// exists.
func TestReadmeListsEveryMetric(t *testing.T) {
	doc := readme(t)
	names := botMetrics(t)
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") && !strings.Contains(doc, "`"+n+"{") {
			t.Errorf("README.md does not list the metric %s", n)
		}
	}
	for _, m := range regexp.MustCompile(`bobbin_[a-z_]+`).FindAllString(doc, -1) {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if !slices.Contains(names, base) && !slices.Contains(names, m) {
			t.Errorf("README.md mentions %s, which the bot does not export", m)
		}
	}
}

// bucketRange is a _bucket series (with or without a label selector)
// under a range.
var bucketRange = regexp.MustCompile(`_bucket(\{[^}]*\})?\[`)

// TestReadmeAlerts: the alert expressions are PromQL that can work:
// balanced, quantiles over rates of buckets, and Redis's memory alert
// refers to maxmemory.
func TestReadmeAlerts(t *testing.T) {
	doc := readme(t)
	start := strings.Index(doc, "**Alert on**")
	if start < 0 {
		t.Fatal("README.md has no Alert on section")
	}
	section := doc[start:]
	list := strings.Index(section, "\n- ")
	section = section[:list+strings.Index(section[list:], "\n\n")]
	exprs := regexp.MustCompile("`([^`]*[a-z_]+\\([^`]*)`").FindAllStringSubmatch(section, -1)
	if len(exprs) < 5 {
		t.Fatalf("found %d expressions in Alert on", len(exprs))
	}
	for _, e := range exprs {
		x := e[1]
		if strings.Count(x, "(") != strings.Count(x, ")") || strings.Count(x, "[") != strings.Count(x, "]") {
			t.Errorf("unbalanced expression %q", x)
		}
		if strings.Contains(x, "histogram_quantile(") && (!bucketRange.MatchString(x) || !strings.Contains(x, "by (le)")) {
			t.Errorf("%q: histogram_quantile needs rate() of the _bucket series summed by (le)", x)
		}
		if regexp.MustCompile(`rate\([a-z_]+(\{[^}]*\})?\)`).MatchString(x) {
			t.Errorf("%q: rate() without a range", x)
		}
	}
	if !strings.Contains(section, "maxmemory") {
		t.Error("the Redis memory alert does not refer to maxmemory")
	}
}

// TestReadmeOnce: text that used to be repeated is said once.
func TestReadmeOnce(t *testing.T) {
	doc := readme(t)
	for _, s := range []string{"FAULT <scenario>", "BOBBIN_FAULT_FULL=1", "(replicas + surge) × SOCKET_CONNECTIONS ≤ 10"} {
		if n := strings.Count(doc, s); n != 1 {
			t.Errorf("README.md says %q %d times, want once", s, n)
		}
	}
}

// TestReadmeConfigurationTable: every variable the bot reads has a row.
func TestReadmeConfigurationTable(t *testing.T) {
	doc := readme(t)
	names := envFields(reflect.TypeFor[config]())
	for k, v := range envFields(reflect.TypeFor[playgroundConfig]()) {
		names["playground."+k] = v
	}
	for _, name := range names {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("README.md's Configuration table has no row for %s", name)
		}
	}
}
