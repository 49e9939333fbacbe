package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bobbinbot/bobbin/bot"
)

// The README is the front door and docs/ the manual; these tests keep the
// parts that follow from the code in step with it (docs_test.go: links,
// the README's commands, the import graph).

// doc is one page of the documentation, by its path from the repository
// root ("README.md", "docs/operations.md").
func doc(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// docPages are README.md and every page under docs/, by path from the
// repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md"}
	for _, p := range pages {
		names = append(names, "docs/"+filepath.Base(p))
	}
	if len(names) < 10 {
		t.Fatalf("found %d pages of documentation: the docs/ walk is broken", len(names))
	}
	return names
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

// TestDocsListEveryMetric: every metric /metrics exports is in
// docs/operations.md, and every bobbin_ metric any page mentions (alerts
// included) exists.
func TestDocsListEveryMetric(t *testing.T) {
	const listing = "docs/operations.md"
	ops := doc(t, listing)
	names := botMetrics(t)
	for _, n := range names {
		if !strings.Contains(ops, "`"+n+"`") && !strings.Contains(ops, "`"+n+"{") {
			t.Errorf("%s does not list the metric %s", listing, n)
		}
	}
	for _, page := range docPages(t) {
		for _, m := range regexp.MustCompile(`bobbin_[a-z_]+`).FindAllString(doc(t, page), -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !slices.Contains(names, base) && !slices.Contains(names, m) {
				t.Errorf("%s mentions %s, which the bot does not export", page, m)
			}
		}
	}
}

// bucketRange is a _bucket series (with or without a label selector)
// under a range.
var bucketRange = regexp.MustCompile(`_bucket(\{[^}]*\})?\[`)

// TestDocsAlerts: the alert expressions in docs/operations.md are PromQL
// that can work: balanced, quantiles over rates of buckets, and Redis's
// memory alert refers to maxmemory.
func TestDocsAlerts(t *testing.T) {
	text := doc(t, "docs/operations.md")
	start := strings.Index(text, "**Alert on**")
	if start < 0 {
		t.Fatal("docs/operations.md has no Alert on section")
	}
	section := text[start:]
	list := strings.Index(section, "\n- ")
	if list < 0 {
		t.Fatal("docs/operations.md's Alert on section has no list")
	}
	if end := strings.Index(section[list:], "\n\n"); end >= 0 {
		section = section[:list+end]
	}
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

// TestDocsOnce: text that used to be repeated is said once in the whole
// documentation (README.md and docs/).
func TestDocsOnce(t *testing.T) {
	pages := docPages(t)
	for _, s := range []string{"FAULT <scenario>", "BOBBIN_FAULT_FULL=1", "(replicas + surge) × SOCKET_CONNECTIONS ≤ 10"} {
		var where []string
		for _, page := range pages {
			for range strings.Count(doc(t, page), s) {
				where = append(where, page)
			}
		}
		if len(where) != 1 {
			t.Errorf("the documentation says %q %d times (%v), want once", s, len(where), where)
		}
	}
}

// TestDocsConfigurationTable: every variable the bot reads has a row in
// docs/configuration.md.
func TestDocsConfigurationTable(t *testing.T) {
	text := doc(t, "docs/configuration.md")
	names := envFields(reflect.TypeFor[config]())
	for k, v := range envFields(reflect.TypeFor[playgroundConfig]()) {
		names["playground."+k] = v
	}
	for _, name := range names {
		if !strings.Contains(text, "| `"+name+"` |") {
			t.Errorf("docs/configuration.md's table has no row for %s", name)
		}
	}
}
