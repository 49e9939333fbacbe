package stream

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/slack-go/slack"
)

// A completed task card lists the links of its tool's result as sources
// (reference slack-agents-2026.md §3): the "url" (or "link", "href") of
// JSON objects, titled by their "title" (or "name", "text"); Markdown
// links, titled by their label; bare URLs, titled by host and path. Only
// http(s) URLs, each once, at most maxTaskSources, titles escaped and
// clipped. Only the start of a long result is read.
const (
	maxTaskSources = 5
	maxSourceTitle = 60
	maxSourceURL   = 1000
	maxSourceScan  = 64 << 10
)

var (
	mdLinkRE  = regexp.MustCompile(`\[([^\[\]\n]{1,300})\]\((https?://[^\s()<>]+)\)`)
	bareURLRE = regexp.MustCompile("https?://[^\\s<>\"'`()\\[\\]{}|\\\\^]+")
)

// resultSources are the task card sources of a tool's result (nil for
// none).
func resultSources(result string) []slack.TaskCardSource {
	if len(result) > maxSourceScan {
		result = result[:maxSourceScan]
	}
	var out []slack.TaskCardSource
	add := func(u, title string) bool {
		u = strings.TrimRight(u, ".,;:!?")
		if !sourceURL(u) || slices.ContainsFunc(out, func(s slack.TaskCardSource) bool { return s.URL == u }) {
			return len(out) < maxTaskSources
		}
		title = strings.Join(strings.Fields(title), " ")
		if title == "" {
			p, _ := url.Parse(u)
			title = strings.TrimSuffix(p.Host+p.EscapedPath(), "/")
		}
		out = append(out, slack.NewTaskCardSource(u, escClip(title, maxSourceTitle)))
		return len(out) < maxTaskSources
	}
	if t := strings.TrimSpace(result); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			jsonSources(v, add)
			return out
		}
	}
	textSources(result, add)
	return out
}

// textSources finds the links of a text: Markdown links, then bare URLs;
// false once add wants no more.
func textSources(s string, add func(u, title string) bool) bool {
	for _, m := range mdLinkRE.FindAllStringSubmatch(s, -1) {
		if !add(m[2], m[1]) {
			return false
		}
	}
	for _, u := range bareURLRE.FindAllString(s, -1) {
		if !add(u, "") {
			return false
		}
	}
	return true
}

// jsonSources walks a decoded JSON value for objects with a link, and
// the links in its strings; false once add wants no more.
func jsonSources(v any, add func(u, title string) bool) bool {
	switch v := v.(type) {
	case string:
		return textSources(v, add)
	case []any:
		for _, e := range v {
			if !jsonSources(e, add) {
				return false
			}
		}
	case map[string]any:
		for _, k := range []string{"url", "link", "href"} {
			if u, ok := v[k].(string); ok {
				var title string
				for _, tk := range []string{"title", "name", "text"} {
					if s, ok := v[tk].(string); ok && s != "" {
						title = s
						break
					}
				}
				if !add(u, title) {
					return false
				}
				break
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !jsonSources(v[k], add) {
				return false
			}
		}
	}
	return true
}

// sourceURL reports whether u may be a task card source: an absolute
// http(s) URL with a host, of a sane length, with nothing that could end
// a link in Slack's markup.
func sourceURL(u string) bool {
	if len(u) > maxSourceURL || strings.ContainsAny(u, " \t\r\n<>|\"") {
		return false
	}
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && p.User == nil
}
