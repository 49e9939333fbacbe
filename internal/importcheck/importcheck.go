// Package importcheck lets each package's tests assert the import rules of
// ARCHITECTURE.md. It is imported only from tests.
package importcheck

import (
	"go/build"
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
