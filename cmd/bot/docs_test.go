package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// updateDocs rewrites the generated blocks of the documentation (the import
// graph in docs/architecture.md) instead of failing on a difference:
//
//	go test ./cmd/bot -run TestDocsImportGraph -update-docs
var updateDocs = flag.Bool("update-docs", false, "rewrite the generated blocks of docs/ from the code")

// mdLink is an inline Markdown link or image: [text](target) or
// [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// proseLines returns the page's lines outside fenced code blocks, with
// inline code spans blanked, so links shown as code are not checked.
func proseLines(page string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			out = append(out, "")
			continue
		}
		if fenced {
			out = append(out, "")
			continue
		}
		out = append(out, inlineCode.ReplaceAllString(line, "``"))
	}
	return out
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// anchors are the fragment ids GitHub gives the page's headings: the
// title in lower case (inline code keeps its text), punctuation dropped,
// spaces made hyphens, repeats numbered -1, -2, ….
func anchors(page string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '_', r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			id = fmt.Sprintf("%s-%d", id, n)
		}
		seen[b.String()]++
		ids[id] = true
	}
	return ids
}

// TestDocsLinks: every relative link in README.md and docs/*.md reaches a
// file of the repository, and its #fragment a heading of that page; every
// page under docs/ is linked from the README.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := docPages(t)
	linked := map[string]bool{}
	checked := 0
	for _, page := range pages {
		for i, line := range proseLines(doc(t, page)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(page), file))
				}
				if page == "README.md" {
					linked[dest] = true
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, i+1, target, dest)
					continue
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: a fragment on a file that is not Markdown", page, i+1, target)
					continue
				}
				if !anchors(doc(t, dest))[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", page, i+1, target, dest, frag)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d links: the link scan is broken", checked)
	}
	for _, page := range pages {
		if page != "README.md" && !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// fenced returns the fenced code blocks of a page.
func fenced(page string) []string {
	var blocks []string
	for rest := page; ; {
		start := strings.Index(rest, "```")
		if start < 0 {
			return blocks
		}
		body := rest[start:]
		body = body[strings.Index(body, "\n")+1:]
		end := strings.Index(body, "```")
		if end < 0 {
			return blocks
		}
		blocks = append(blocks, body[:end])
		rest = body[end+3:]
	}
}

// TestReadmeCommands: the README's commands are the ones that work. The
// playground and the test command are there as written; the Slack command
// sets every variable the configuration requires (each one, left out, is a
// configuration error); CI's .ci/run calls the same test command; the Go
// version is go.mod's.
func TestReadmeCommands(t *testing.T) {
	readme := doc(t, "README.md")
	blocks := fenced(readme)
	has := func(cmd string) bool {
		for _, b := range blocks {
			for _, line := range strings.Split(b, "\n") {
				if strings.TrimSpace(line) == cmd {
					return true
				}
			}
		}
		return false
	}
	for _, cmd := range []string{"go run ./cmd/bot playground", "scripts/test.sh"} {
		if !has(cmd) {
			t.Errorf("README.md has no command block with %q", cmd)
		}
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^scripts/test\.sh `).Match(ci) {
		t.Error(".ci/run does not run scripts/test.sh, the README's test command")
	}

	var slack string
	for _, b := range blocks {
		if strings.HasSuffix(strings.TrimSpace(b), "go run ./cmd/bot") {
			slack = b
		}
	}
	if slack == "" {
		t.Fatal("README.md has no command block ending in go run ./cmd/bot")
	}
	env := map[string]string{}
	for _, kv := range regexp.MustCompile(`\b([A-Z][A-Z0-9_]*)=(\S+)`).FindAllStringSubmatch(slack, -1) {
		env[kv[1]] = kv[2]
	}
	getenv := func(skip string) func(string) string {
		return func(k string) string {
			if k == skip {
				return ""
			}
			return env[k]
		}
	}
	if _, err := loadConfig(getenv("")); err != nil {
		t.Errorf("the README's Slack command does not configure the bot: %v", err)
	}
	for _, required := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "LLM_PROVIDER", "LLM_MODEL"} {
		if _, ok := env[required]; !ok {
			t.Errorf("the README's Slack command does not set %s", required)
			continue
		}
		if _, err := loadConfig(getenv(required)); err == nil {
			t.Errorf("the README calls %s required, but the bot starts without it", required)
		}
		if !strings.Contains(readme, "`"+required+"`") {
			t.Errorf("README.md does not name %s among the required variables", required)
		}
	}

	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	if want := fmt.Sprintf("**Go %s.%s** or newer", m[1], m[2]); !strings.Contains(readme, want) {
		t.Errorf("README.md does not say %q (go.mod's version)", want)
	}
}

// The generated import graph in docs/architecture.md sits between these
// two lines.
const (
	graphBegin = "<!-- import graph: begin (generated: go test ./cmd/bot -run TestDocsImportGraph -update-docs) -->"
	graphEnd   = "<!-- import graph: end -->"
)

// listedPackage is what the import graph needs of `go list -json`.
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// importGraph renders the module's packages and their imports of the
// module's own packages, from `go list -json ./...` run at the repository
// root: one line per package, "pkg -> dep, dep" ("-" for none); a
// "pkg (tests) -> …" line for what its tests import besides; packages that
// are not part of the bot's binary (reached from cmd/bot without tests)
// are marked "[not in the bot]".
func importGraph(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	mod := ""
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		pkgs[p.ImportPath] = p
		if strings.HasSuffix(p.ImportPath, "/cmd/bot") {
			mod = strings.TrimSuffix(p.ImportPath, "/cmd/bot")
		}
	}
	if mod == "" {
		t.Fatal("go list did not list cmd/bot")
	}
	short := func(p string) string { return strings.TrimPrefix(p, mod+"/") }
	ours := func(self string, imps ...[]string) []string {
		var deps []string
		for _, list := range imps {
			for _, imp := range list {
				if _, ok := pkgs[imp]; ok && imp != self && !slices.Contains(deps, short(imp)) {
					deps = append(deps, short(imp))
				}
			}
		}
		slices.Sort(deps)
		return deps
	}
	inBot := map[string]bool{}
	var reach func(string)
	reach = func(p string) {
		if inBot[p] {
			return
		}
		inBot[p] = true
		for _, imp := range pkgs[p].Imports {
			if _, ok := pkgs[imp]; ok {
				reach(imp)
			}
		}
	}
	reach(mod + "/cmd/bot")

	join := func(deps []string) string {
		if len(deps) == 0 {
			return "-"
		}
		return strings.Join(deps, ", ")
	}
	var b strings.Builder
	for _, path := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[path]
		name := short(path)
		if !inBot[path] {
			name += " [not in the bot]"
		}
		deps := ours(path, p.Imports)
		fmt.Fprintf(&b, "%s -> %s\n", name, join(deps))
		var extra []string
		for _, d := range ours(path, p.TestImports, p.XTestImports) {
			if !slices.Contains(deps, d) {
				extra = append(extra, d)
			}
		}
		if len(extra) > 0 {
			fmt.Fprintf(&b, "%s (tests) -> %s\n", short(path), join(extra))
		}
	}
	return b.String()
}

// TestDocsImportGraph: the import graph in docs/architecture.md is what
// `go list` says. After adding or re-wiring a package, regenerate it:
//
//	go test ./cmd/bot -run TestDocsImportGraph -update-docs
func TestDocsImportGraph(t *testing.T) {
	const name = "docs/architecture.md"
	page := doc(t, name)
	begin := strings.Index(page, graphBegin)
	end := strings.Index(page, graphEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no generated import graph between %q and %q", name, graphBegin, graphEnd)
	}
	head := page[:begin+len(graphBegin)]
	got := page[len(head):end]
	want := "\n```text\n" + importGraph(t) + "```\n"
	if got == want {
		return
	}
	if *updateDocs {
		file := filepath.Join("..", "..", filepath.FromSlash(name))
		if err := os.WriteFile(file, []byte(head+want+page[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: import graph rewritten", name)
		return
	}
	t.Errorf("%s: the import graph differs from go list (regenerate: go test ./cmd/bot -run TestDocsImportGraph -update-docs)\n%s",
		name, lineDiff(got, want))
}

// lineDiff lists the lines only in the page (-) and only in go list (+).
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		b.WriteString("(same lines, different order or blank lines)\n")
	}
	return b.String()
}

// TestReadmeFrontDoor: the README stays a front door (the pitch, the
// picture, the commands, the links); reference text belongs in docs/.
func TestReadmeFrontDoor(t *testing.T) {
	const most = 10 << 10
	if n := len(doc(t, "README.md")); n > most {
		t.Errorf("README.md is %d bytes, over %d: move reference text into a page under docs/ and link it", n, most)
	}
}
