package session

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const installCanary = "xoxe.xoxb-1-CANARY-install-token"

func sampleInstallation(team string) Installation {
	return Installation{
		TeamID: team, TeamName: "Acme", AppID: "A1", BotToken: installCanary, BotUserID: "U0BOT", BotID: "B0BOT",
		Scopes: []string{"chat:write", "commands"}, InstallerID: "U1", RefreshToken: "xoxe-1-CANARY-refresh",
		ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second), IssuedAt: time.Now().UTC().Truncate(time.Second),
	}
}

func TestInstallationSealedRoundTrip(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team := testThread().Team
	if _, err := s.Installation(ctx, team); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Installation before install = %v, want ErrNotFound", err)
	}
	in := sampleInstallation(team)
	if err := s.PutInstallation(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := s.Installation(ctx, team)
	if err != nil {
		t.Fatal(err)
	}
	in.Installed, in.Updated = got.Installed, got.Updated
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got.Installed.IsZero() || !got.Rotating() {
		t.Errorf("Installed %v, Rotating %v", got.Installed, got.Rotating())
	}
	// The tokens are in no key in clear, and not in log or fmt output.
	for _, k := range scanKeys(t, s) {
		v, _ := s.rdb.Dump(ctx, k).Result()
		if strings.Contains(v, "CANARY") {
			t.Errorf("key %s holds a token in clear", k)
		}
	}
	if out := fmt.Sprintf("%v %+v %s", got, got, got); strings.Contains(out, "CANARY") {
		t.Errorf("fmt shows a token: %s", out)
	}
	// A record copied under another workspace's key does not open.
	other := testThread().Team
	v := s.rdb.Get(ctx, s.k.install(team)).Val()
	s.rdb.Set(ctx, s.k.install(other), v, 0)
	if _, err := s.Installation(ctx, other); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("copied record opened: %v", err)
	}
	// A workspace record does not pose as an org's.
	s.rdb.Set(ctx, s.k.install(team), strings.Replace(v, `{"sealed"`, `{"org_wide":true,"sealed"`, 1), 0)
	if _, err := s.Installation(ctx, team); err == nil {
		t.Error("a workspace record opened as an org-wide one")
	}
	// Without the key nothing opens; with another key neither.
	s.rdb.Set(ctx, s.k.install(team), v, 0)
	wrong := peer(t, s, Options{SecretKey: testKey(2)})
	if _, err := wrong.Installation(ctx, team); !errors.Is(err, ErrNoSecretKey) {
		t.Errorf("Installation with another key = %v, want ErrNoSecretKey", err)
	}
	nokey := peer(t, s, Options{})
	if err := nokey.PutInstallation(ctx, in); !errors.Is(err, ErrNoSecretKey) {
		t.Errorf("PutInstallation without a key = %v", err)
	}

	org := Installation{EnterpriseID: "E" + strings.ToUpper(randomID()), OrgWide: true, BotToken: installCanary, BotUserID: "W0BOT"}
	if err := s.PutInstallation(ctx, org); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Installation(ctx, org.EnterpriseID); err != nil || !got.OrgWide || got.BotUserID != "W0BOT" {
		t.Errorf("org install = %+v, %v", got, err)
	}
	if _, err := s.DeleteInstallation(ctx, team); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Installation(ctx, team); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

// TestInstallationLockOneHolder: many replicas refreshing at once hold the
// lock one at a time.
func TestInstallationLockOneHolder(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	p := peer(t, s, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	team := testThread().Team
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		st := s
		if i%2 == 1 {
			st = p
		}
		wg.Go(func() {
			unlock, err := st.LockInstallation(ctx, team, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			n := holders.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			holders.Add(-1)
			unlock()
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders at once, want 1", most.Load())
	}
}

func TestInstallAliasAndOrgDelete(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1)})
	ctx := ctxT(t)
	ent := "E" + strings.ToUpper(randomID())
	t1, t2 := testThread().Team, testThread().Team
	if id, err := s.InstallAlias(ctx, t1); err != nil || id != "" {
		t.Errorf("alias before = %q, %v", id, err)
	}
	for _, team := range []string{t1, t2, t1} {
		if err := s.PutInstallAlias(ctx, team, ent); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := s.InstallAlias(ctx, t2); err != nil || id != ent {
		t.Errorf("alias = %q, %v", id, err)
	}
	teams, err := s.DeleteInstallation(ctx, ent)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{t1, t2}
	if t2 < t1 {
		want = []string{t2, t1}
	}
	if diff := cmp.Diff(want, teams); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
}

func TestInstallStateSingleUse(t *testing.T) {
	s := newStore(t, Options{})
	p := peer(t, s, Options{})
	ctx := ctxT(t)
	state := strings.Repeat("ab", 20)
	if err := s.PutInstallState(ctx, state, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.PutInstallState(ctx, state, time.Minute); err == nil {
		t.Error("a state was replaced")
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 6 {
		st := s
		if i%2 == 1 {
			st = p
		}
		wg.Go(func() {
			if ok, err := st.TakeInstallState(ctx, state); err != nil {
				t.Error(err)
			} else if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d takers won, want 1", wins.Load())
	}
	for _, bad := range []string{"", "short", strings.Repeat("x", 200), "has:colon-and-is-long-enough"} {
		if ok, err := s.TakeInstallState(ctx, bad); ok || err != nil {
			t.Errorf("TakeInstallState(%q) = %v, %v", bad, ok, err)
		}
	}
	if err := s.PutInstallState(ctx, strings.Repeat("cd", 20), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if ok, _ := s.TakeInstallState(ctx, strings.Repeat("cd", 20)); ok {
		t.Error("an expired state was taken")
	}
}

// TestRetireWorkspace: an uninstalled workspace's configuration expires
// after the session grace, found through its index; another workspace's
// stays; installing again within the grace brings it back.
func TestRetireWorkspace(t *testing.T) {
	s := newStore(t, Options{SecretKey: testKey(1), SessionTTL: 3 * time.Second})
	ctx := ctxT(t)
	gone, kept := testThread(), testThread()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []ThreadKey{gone, kept} {
		must(s.PutRegistration(ctx, k.Team, sampleRegistration("docs")))
		must(s.PutToolPins(ctx, k.Team, "docs", map[string]string{"a": "h"}))
		must(s.PutToolPins(ctx, k.Team, "config-server", map[string]string{"b": "h"}))
		must(s.PutOAuthConnection(ctx, k.Team, "config-server", "U1", []byte(`{"t":1}`)))
		must(s.PutOAuthClient(ctx, k.Team, "https://as.example.com", []byte(`{"c":1}`)))
		must(s.Audit(ctx, k.Team, map[string]string{"action": "x"}))
		must(s.PutInstallation(ctx, sampleInstallation(k.Team)))
	}
	// Data written before the index existed is found through the
	// registrations.
	s.rdb.SRem(ctx, s.k.workspaceIndex(gone.Team), s.k.pins(gone.Team, "docs"))

	workspaceKeys := func(team string) map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, k := range scanKeys(t, s) {
			if strings.Contains(k, "{w:"+team+"}") {
				out[k] = s.rdb.PTTL(ctx, k).Val()
			}
		}
		return out
	}
	if _, err := s.DeleteInstallation(ctx, gone.Team); err != nil {
		t.Fatal(err)
	}
	must(s.RetireWorkspace(ctx, gone.Team))
	if ok, err := s.Retired(ctx, gone.Team); !ok || err != nil {
		t.Errorf("Retired = %v, %v", ok, err)
	}
	for k, ttl := range workspaceKeys(gone.Team) {
		if ttl <= 0 || ttl > 3*time.Second {
			t.Errorf("retired key %s has TTL %v, want within the 3 s grace", k, ttl)
		}
	}
	// Re-installing within the grace brings the configuration back.
	must(s.PutInstallation(ctx, sampleInstallation(gone.Team)))
	if ok, _ := s.Retired(ctx, gone.Team); ok {
		t.Error("still retired after a re-install")
	}
	for k, ttl := range workspaceKeys(gone.Team) {
		if !strings.HasSuffix(k, ":audit") && ttl != -1 {
			t.Errorf("restored key %s has TTL %v", k, ttl)
		}
	}
	// Retired again, it all expires.
	_, _ = s.DeleteInstallation(ctx, gone.Team)
	must(s.RetireWorkspace(ctx, gone.Team))
	deadline := time.Now().Add(15 * time.Second)
	for len(workspaceKeys(gone.Team)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := workspaceKeys(gone.Team); len(left) > 0 {
		t.Errorf("keys left after the grace: %v", left)
	}
	if _, err := s.Registrations(ctx, gone.Team); err != nil {
		t.Error(err)
	}
	// The other workspace is untouched.
	for k, ttl := range workspaceKeys(kept.Team) {
		if !strings.HasSuffix(k, ":audit") && ttl != -1 {
			t.Errorf("the other workspace's key %s got TTL %v", k, ttl)
		}
	}
	if regs, err := s.Registrations(ctx, kept.Team); err != nil || len(regs) != 1 {
		t.Errorf("other workspace's registrations = %v, %v", regs, err)
	}
	if _, err := s.Installation(ctx, kept.Team); err != nil {
		t.Errorf("other workspace's installation: %v", err)
	}
}
