package bot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/bobbinbot/bobbin/bot/slackapi"
)

// slackCalls type-checks the non-test sources of bot and of every package
// below it (bot/slackapi, bot/mrkdwn, the feature packages) and returns
// the slack-go *slack.Client methods they use, each with the places it is
// used. A method counts when it is called (or taken as a value) on a
// *slack.Client, on something embedding one, or on an interface that
// *slack.Client implements: however the calls are wrapped, the request
// reaches Slack with the bot's token.
func slackCalls(t *testing.T) map[string][]string {
	t.Helper()
	calls, err := slackCallsOnce()
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// slackCallsOnce runs the analysis once per test binary.
var slackCallsOnce = sync.OnceValues(analyzeSlackCalls)

func analyzeSlackCalls() (map[string][]string, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	dirs, err := exec.Command("go", "list", "-f", "{{.Dir}}\t{{.ImportPath}}", "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %v", err)
	}
	calls := map[string][]string{}
	found := false
	for line := range strings.Lines(string(dirs)) {
		dir, path, _ := strings.Cut(strings.TrimSpace(line), "\t")
		ok, err := slackCallsIn(dir, path, exports, calls)
		if err != nil {
			return nil, err
		}
		found = found || ok
	}
	if !found {
		return nil, errors.New("nothing in bot/ imports slack-go")
	}
	return calls, nil
}

// slackCallsIn adds the slack-go calls of the package in dir to calls; it
// reports whether the package imports slack-go at all.
func slackCallsIn(dir, path string, exports map[string]string, calls map[string][]string) (bool, error) {
	pkg, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		return false, err
	}
	root, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return false, err
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	checked, err := conf.Check(path, fset, files, info)
	if err != nil {
		return false, fmt.Errorf("type-checking %s: %w", path, err)
	}
	var client types.Type
	for _, imp := range checked.Imports() {
		if imp.Path() == "github.com/slack-go/slack" {
			client = types.NewPointer(imp.Scope().Lookup("Client").Type())
		}
	}
	if client == nil {
		return false, nil
	}
	for sel, s := range info.Selections {
		if s.Kind() != types.MethodVal && s.Kind() != types.MethodExpr {
			continue
		}
		fn, ok := s.Obj().(*types.Func)
		if !ok {
			continue
		}
		recv := fn.Type().(*types.Signature).Recv().Type()
		switch {
		case types.Identical(recv, client):
		case types.IsInterface(recv) && types.Implements(client, recv.Underlying().(*types.Interface)):
		default:
			continue
		}
		pos := fset.Position(sel.Sel.Pos())
		rel, err := filepath.Rel(root, pos.Filename)
		if err != nil {
			rel = filepath.Base(pos.Filename)
		}
		calls[fn.Name()] = append(calls[fn.Name()], fmt.Sprintf("bot/%s:%d", filepath.ToSlash(rel), pos.Line))
	}
	return true, nil
}

// manifest is the part of manifest.yaml the scope checks read.
type manifest struct {
	Features map[string]any `yaml:"features"`
	OAuth    struct {
		Scopes struct {
			Bot         []string
			BotOptional []string `yaml:"bot_optional"`
		}
	} `yaml:"oauth_config"`
	Settings struct {
		EventSubscriptions struct {
			BotEvents []string `yaml:"bot_events"`
		} `yaml:"event_subscriptions"`
	} `yaml:"settings"`
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	raw, err := os.ReadFile("../manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestManifestScopesFollowTheCode derives the scopes from what the bot
// does and checks manifest.yaml asks for exactly those: no scope missing
// (a call failing with missing_scope in production), none unused (an
// install asking people for more than the bot needs).
func TestManifestScopesFollowTheCode(t *testing.T) {
	calls := slackCalls(t)
	if len(calls) == 0 {
		t.Fatal("found no slack-go calls: the analysis is broken")
	}
	// Every call has a row, every row is called.
	rowCalled := map[string]bool{}
	for _, goName := range slices.Sorted(maps.Keys(calls)) {
		row, ok := slackapi.WebMethodOf(goName)
		if !ok {
			t.Errorf("the bot calls (*slack.Client).%s (%s), which has no row in webMethods (bot/slackapi/scopes.go): add its Slack method and scopes",
				goName, strings.Join(calls[goName], ", "))
			continue
		}
		rowCalled[row.Name] = true
	}
	for _, row := range slackapi.WebMethods() {
		if !rowCalled[row.Name] {
			t.Errorf("webMethods has a row for %s, but nothing in bot/ calls %v: remove the row (its scopes may be unused)", row.Name, row.GoAPI)
		}
	}

	m := readManifest(t)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(slackapi.BotEvents())), slices.Sorted(slices.Values(m.Settings.EventSubscriptions.BotEvents))); diff != "" {
		t.Errorf("manifest.yaml subscribes to events the bot does not handle, or misses one it does (-handled +manifest):\n%s", diff)
	}
	for f := range slackapi.BotFeatures() {
		if _, ok := m.Features[f]; !ok {
			t.Errorf("manifest.yaml lacks the feature %s the bot uses", f)
		}
	}
	want := slackapi.RequiredScopes()
	got := slices.Sorted(slices.Values(m.OAuth.Scopes.Bot))
	for _, s := range want {
		if !slices.Contains(got, s) {
			t.Errorf("manifest.yaml lacks bot scope %s, which %s needs", s, strings.Join(usersOf(s), ", "))
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			t.Errorf("manifest.yaml asks for bot scope %s, which nothing the bot calls, handles or uses needs", s)
		}
	}
	// Optional scopes: exactly those of optionalBotScopes, never required.
	if diff := cmp.Diff(slices.Sorted(maps.Keys(slackapi.OptionalBotScopes())), slices.Sorted(slices.Values(m.OAuth.Scopes.BotOptional))); diff != "" {
		t.Errorf("manifest.yaml bot_optional differs from optionalBotScopes (-code +manifest):\n%s", diff)
	}
}

// usersOf names what needs scope s, for failure messages.
func usersOf(s string) []string {
	var out []string
	for _, m := range slackapi.WebMethods() {
		if slices.Contains(m.Scopes, s) {
			out = append(out, m.Name)
		}
	}
	for e, es := range slackapi.BotEvents() {
		if es == s {
			out = append(out, "event "+e)
		}
	}
	for f, fs := range slackapi.BotFeatures() {
		if fs == s {
			out = append(out, "feature "+f)
		}
	}
	slices.Sort(out)
	return out
}

// TestSlackCallsAnalysis shows the analysis is live: it finds calls made
// through the client field and through the name cache's parameter.
func TestSlackCallsAnalysis(t *testing.T) {
	calls := slackCalls(t)
	for _, name := range []string{"AuthTestContext", "PostMessageContext", "GetConversationInfoContext"} {
		if len(calls[name]) == 0 {
			t.Errorf("analysis did not find %s; found %v", name, slices.Sorted(maps.Keys(calls)))
		}
	}
}

func TestMissingScopes(t *testing.T) {
	want := []string{"chat:write", "channels:read", "groups:read"}
	if got := slackapi.MissingScopes("", want); got != nil {
		t.Errorf("no header: %v, want nil (cannot tell)", got)
	}
	if diff := cmp.Diff([]string{"channels:read", "groups:read"}, slackapi.MissingScopes("chat:write, users:read", want)); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if got := slackapi.MissingScopes("groups:read,chat:write,channels:read", want); got != nil {
		t.Errorf("all granted: %v", got)
	}
}
