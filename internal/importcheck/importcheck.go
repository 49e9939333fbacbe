// Package importcheck lets each package's tests assert the import rules of
// ARCHITECTURE.md. It is imported only from tests.
package importcheck

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Forbid fails t if the package in dir (usually ".") imports, in its non-test
// files, any path equal to or below one of the forbidden prefixes.
func Forbid(t *testing.T, dir string, forbidden ...string) {
	t.Helper()
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("importcheck: reading %s: %v", dir, err)
	}
	for _, imp := range pkg.Imports {
		for _, f := range forbidden {
			if imp == f || strings.HasPrefix(imp, f+"/") {
				t.Errorf("package %s imports %s, which ARCHITECTURE.md forbids (rule: %s)", pkg.ImportPath, imp, f)
			}
		}
	}
}

// Module is this module's path, for building forbidden import paths.
const Module = "github.com/bobbinbot/bobbin"

// Third-party packages with an owner in ARCHITECTURE.md.
const (
	SlackGo = "github.com/slack-go/slack"
	GoRedis = "github.com/redis/go-redis"
	MCPSDK  = "github.com/modelcontextprotocol/go-sdk"
)

// ForbidExcept fails t if the package in dir imports, in its non-test
// files, a path equal to or below prefix other than the allowed ones (or
// below them): "nothing of bot but bot/mrkdwn".
func ForbidExcept(t *testing.T, dir, prefix string, allowed ...string) {
	t.Helper()
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("importcheck: reading %s: %v", dir, err)
	}
	for _, imp := range pkg.Imports {
		if imp != prefix && !strings.HasPrefix(imp, prefix+"/") {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || imp == a || strings.HasPrefix(imp, a+"/")
		}
		if !ok {
			t.Errorf("package %s imports %s, which ARCHITECTURE.md forbids (rule: %s except %v)", pkg.ImportPath, imp, prefix, allowed)
		}
	}
}

// OnlyUnder fails t if a package of pattern (for example "./..." run from
// the module root) other than those equal to or below one of the allowed
// prefixes imports, in its non-test files, path or a package below it.
// It asks `go list`, so it sees every package of the module at once.
func OnlyUnder(t *testing.T, pattern, path string, allowed ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pattern).Output()
	if err != nil {
		t.Fatalf("importcheck: go list %s: %v", pattern, err)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := fields[0]
		if slices.ContainsFunc(allowed, func(a string) bool { return pkg == a || strings.HasPrefix(pkg, a+"/") }) {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == path || strings.HasPrefix(imp, path+"/") {
				t.Errorf("package %s imports %s, which only %v may (ARCHITECTURE.md)", pkg, imp, allowed)
			}
		}
	}
}

// NoStoreAssertions fails t if a non-test Go file under root type-asserts
// (or type-switches on) a store: an expression whose name ends in "store"
// or "Store", like b.store.(x) or opts.Store.(x). A feature that needs
// more of a store requires it in the interface it is given, so a missing
// method fails the build instead of switching the feature off at run time
// (STYLE.md §2). testdata, vendor, node_modules and hidden directories are
// skipped.
func NoStoreAssertions(t *testing.T, root string) {
	t.Helper()
	for _, at := range StoreAssertions(t, root) {
		t.Errorf("%s type-asserts a store; require the methods in the store interface instead", at)
	}
}

// StoreAssertions lists the store type assertions NoStoreAssertions
// refuses, as "file:line" under root.
func StoreAssertions(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ta, ok := n.(*ast.TypeAssertExpr); ok && isStore(ta.X) {
				found = append(found, fset.Position(ta.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("importcheck: scanning %s: %v", root, err)
	}
	return found
}

// isStore reports whether e names a store: x, x.y or x.y() whose last
// name ends in "store" (any case).
func isStore(e ast.Expr) bool {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.CallExpr:
			e = x.Fun
		case *ast.Ident:
			return strings.HasSuffix(strings.ToLower(x.Name), "store")
		case *ast.SelectorExpr:
			return strings.HasSuffix(strings.ToLower(x.Sel.Name), "store")
		default:
			return false
		}
	}
}
