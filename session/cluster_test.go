package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bobbinbot/bobbin/internal/rediscluster"
)

// TestCluster runs the store's contention, approval, rate-budget and
// transcript tests against a real three-primary Redis Cluster, so every Lua
// script is proven single-slot (a cross-slot script fails with CROSSSLOT)
// and the approval wake-up finds the node that owns its list.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no Redis Cluster")
	}
	if why := rediscluster.Available(); why != "" {
		t.Skip("no Redis Cluster: " + why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rediscluster.Start(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	clusterURL = c.URL()
	t.Cleanup(func() { clusterURL = "" })

	t.Run("client", func(t *testing.T) {
		s := newStore(t, Options{})
		if _, ok := s.rdb.(*redis.ClusterClient); !ok {
			t.Fatalf("store client is %T, want *redis.ClusterClient", s.rdb)
		}
		// Keys of different threads land on different primaries: the test
		// would prove nothing on one node.
		nodes := map[string]bool{}
		cc := s.rdb.(*redis.ClusterClient)
		for i := range 32 {
			k := testThread()
			k.ThreadTS = "1700000000." + strings.Repeat("0", 5) + string(rune('0'+i%10))
			node, err := cc.MasterForKey(ctx, s.k.thread(k).lease)
			if err != nil {
				t.Fatal(err)
			}
			nodes[node.Options().Addr] = true
		}
		if len(nodes) < 2 {
			t.Errorf("32 threads all hashed to %v", nodes)
		}
	})
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"LeaseExclusiveAndFenced", TestLeaseExclusiveAndFenced},
		{"LeaseContention", TestLeaseContention},
		{"QueueAndReleaseIfIdle", TestQueueAndReleaseIfIdle},
		{"Orphans", TestOrphans},
		{"QueueNeverStranded", TestQueueNeverStranded},
		{"ScriptCacheFlushed", TestScriptCacheFlushed},
		{"ApprovalDecideExactlyOnceAcrossClients", TestApprovalDecideExactlyOnceAcrossClients},
		{"WaitApprovalWokenByOtherClient", TestWaitApprovalWokenByOtherClient},
		{"ApprovalExpiry", TestApprovalExpiry},
		{"RateBudgetConcurrentTakers", TestRateBudgetConcurrentTakers},
		{"SpendBurstReserveAndChannels", TestSpendBurstReserveAndChannels},
		{"ThrottledPausesEveryReplicaAndShrinks", TestThrottledPausesEveryReplicaAndShrinks},
		{"LiveSlots", TestLiveSlots},
		{"Admit", TestAdmit},
		{"AdmitConcurrentFirstWriterWins", TestAdmitConcurrentFirstWriterWins},
		{"TranscriptRoundTrip", TestTranscriptRoundTrip},
		{"LargeTranscriptReplace", TestLargeTranscriptReplace},
		{"ThreadCache200", TestThreadCache200},
		{"ThreadCacheEditsAndDeletions", TestThreadCacheEditsAndDeletions},
		{"ThreadCacheBackfill", TestThreadCacheBackfill},
		{"RegistrationRoundTripEncrypted", TestRegistrationRoundTripEncrypted},
		{"ToolPins", TestToolPins},
		{"StopRequestFollowsTheTurn", TestStopRequestFollowsTheTurn},
		{"SaveReplyFencedAndPerTurn", TestSaveReplyFencedAndPerTurn},
		{"EnqueueMarkedIsFoundByOrphans", TestEnqueueMarkedIsFoundByOrphans},
		{"AuditBounded", TestAuditBounded},
		{"EveryKeyHasTTLOrBound", TestEveryKeyHasTTLOrBound},
		{"QuestionAnsweredExactlyOnceAcrossReplicas", TestQuestionAnsweredExactlyOnceAcrossReplicas},
		{"QuestionWaitWokenExpiredAndPending", TestQuestionWaitWokenExpiredAndPending},
		{"QuestionKeysExpire", TestQuestionKeysExpire},
		{"InstallationSealedRoundTrip", TestInstallationSealedRoundTrip},
		{"InstallAliasAndOrgDelete", TestInstallAliasAndOrgDelete},
		{"RetireWorkspace", TestRetireWorkspace},
		{"RegistrationConcurrentAdds", TestRegistrationConcurrentAdds},
		{"RegistrationScopeRacesRemove", TestRegistrationScopeRacesRemove},
		{"WorkspaceVersionMoves", TestWorkspaceVersionMoves},
		{"ClaimOAuthPrompt", TestClaimOAuthPrompt},
	} {
		t.Run(tc.name, tc.f)
	}
}

func TestClusterURL(t *testing.T) {
	for _, tc := range []struct {
		url   string
		addrs []string
		err   string
	}{
		{url: "redis://a:7000?cluster=true&addr=b:7001&addr=c:7002", addrs: []string{"a:7000", "b:7001", "c:7002"}},
		{url: "rediss://u:secretpw@a:7000/0?cluster=1", addrs: []string{"a:7000"}},
		{url: "redis://u:secretpw@a:7000?cluster=false", err: "cluster must be true"},
		{url: "redis://u:secretpw@a:7000/3?cluster=true", err: "only database 0"},
		{url: "redis://u:secretpw@a:7000?cluster=true&bogus=1", err: "unexpected option: bogus"},
		{url: "redis://u:secretpw@a:7000?cluster=true&addr=nocolon", err: "addr"},
	} {
		if !isClusterURL(tc.url) {
			t.Errorf("isClusterURL(%q) = false", tc.url)
			continue
		}
		co, err := parseClusterURL(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseClusterURL(%q) error = %v, want %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secretpw") {
				t.Errorf("error quotes the password: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseClusterURL(%q): %v", tc.url, err)
			continue
		}
		if strings.Join(co.Addrs, ",") != strings.Join(tc.addrs, ",") {
			t.Errorf("parseClusterURL(%q).Addrs = %v, want %v", tc.url, co.Addrs, tc.addrs)
		}
	}
	for _, u := range []string{"redis://a:6379/0", "redis://s:26379?master_name=m&addr=t:26379"} {
		if isClusterURL(u) {
			t.Errorf("isClusterURL(%q) = true", u)
		}
	}
}
