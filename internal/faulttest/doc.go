// Package faulttest is Bobbin's fault-test suite: it builds the bot binary
// (cmd/bot) once, runs several replicas as real OS processes against the
// Slack emulator (internal/slackemu), the fake model server
// (internal/llmemu) and throwaway redis-server processes of its own, and
// breaks things on purpose: duplicate and redelivered envelopes, kill -9 and
// SIGSTOP of lease holders, rolling restarts, Redis restarts and outages.
// Each scenario checks the reliability rules (exactly-once answers, no stale
// writes, takeover, connection budget) and prints its figures.
//
// Default sizes keep the package to a few minutes on two cores;
// BOBBIN_FAULT_FULL=1 runs the full sizes. TestSoak runs 75 s of traffic by
// default; -soak=30m (with -timeout=45m, -soak-rate, -soak-restart,
// -soak-workspaces) runs the long soak, and -artifacts keeps its CSV and
// PNG curves. TestWeight reports idle and peak RSS and start-up time
// (BOBBIN_WEIGHT_ROUNDS=3). Tests skip when redis-server is not on PATH,
// and under -short.
//
// The package holds only tests; its non-test part is this comment. It must
// not be imported by anything.
package faulttest
