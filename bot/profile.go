package bot

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/profile"
	"github.com/bobbinbot/bobbin/agent/servers"
	"github.com/bobbinbot/bobbin/provider"
	"github.com/bobbinbot/bobbin/session"
)

// Operators' controls (issue 27): the profile that applies to a turn, the
// budget checked before each model call, usage metering and the turn's
// trace span. cmd/bot loads PROFILES_CONFIG into Options.Profiles.

// ProfileOptions are the operator's profiles and what they need.
type ProfileOptions struct {
	// Config is PROFILES_CONFIG (nil: no profiles, no budgets; usage is
	// still metered).
	Config *profile.Config
	// Providers are the model clients of Config.Providers, by name.
	Providers map[string]provider.Provider
}

// meterStore is session.Store's usage and budget methods and the binding
// a turn reads (the reports and binding commands are bot/admin's).
type meterStore interface {
	CheckBudget(ctx context.Context, team, channel, user string, limits []session.Limit, now time.Time) (session.BudgetVerdict, error)
	RecordUsage(ctx context.Context, team string, r session.UsageRecord, now time.Time, retention time.Duration) error
	ProfileBinding(ctx context.Context, team, channel string) (string, error)
}

// resolveProfile is the profile of channel in team: an admin's binding,
// then the file's channels:, then dm: or default:. A binding that cannot
// be read counts as none (logged).
func (b *Bot) resolveProfile(ctx context.Context, team, channel string) (*profile.Profile, profile.Source) {
	cfg := b.opts.Profiles.Config
	if cfg == nil {
		return nil, profile.SourceNone
	}
	binding, err := b.store.ProfileBinding(ctx, team, channel)
	if err != nil {
		b.log.Warn("bot: reading the channel's profile binding failed; using the configured profile", "team", team, "channel", channel, "err", err)
	}
	return cfg.Resolve(channel, strings.HasPrefix(channel, "D"), binding)
}

// turnProfile is what a profile changes in one turn.
type turnProfile struct {
	p        *profile.Profile
	model    string
	provider provider.Provider
	provName string
}

// profileFor resolves the turn's profile.
func (b *Bot) profileFor(ctx context.Context, k session.ThreadKey) turnProfile {
	p, _ := b.resolveProfile(ctx, k.Team, k.Channel)
	tp := turnProfile{p: p, model: b.opts.Model}
	if p == nil {
		return tp
	}
	if p.Model != "" {
		tp.model = p.Model
	}
	if p.Provider != "" {
		tp.provider = b.opts.Profiles.Providers[p.Provider]
		if kind := b.opts.Profiles.Config.Providers[p.Provider].Kind; kind != "" {
			tp.provName = kind
		}
	}
	return tp
}

// system adds the profile's prompt after the session's (which keeps the
// bot's own rules).
func (tp turnProfile) system(s string) string {
	if tp.p == nil || strings.TrimSpace(tp.p.SystemPrompt) == "" {
		return s
	}
	return s + "\n\n" + strings.TrimSpace(tp.p.SystemPrompt)
}

// filter keeps the tools of the servers the profile names (tools of no
// server stay): it narrows what the access policy offered, never widens.
// Names of registered_servers resolve against the workspace's
// registrations here: tools carries a registered server's tools only when
// the workspace registered it (and a registration never takes a name of
// MCP_CONFIG, which the profile's load keeps out of registered_servers).
func (tp turnProfile) filter(tools []agent.Tool, notReady []servers.NotReady) ([]agent.Tool, []servers.NotReady) {
	if !tp.p.Narrows() {
		return tools, notReady
	}
	out := tools[:0:0]
	for _, t := range tools {
		ht, ok := t.(agent.HintedTool)
		if !ok || ht.Hints().Server == "" || tp.p.Filter(ht.Hints().Server) {
			out = append(out, t)
		}
	}
	var nr []servers.NotReady
	for _, s := range notReady {
		if tp.p.Filter(s.Server) {
			nr = append(nr, s)
		}
	}
	return out, nr
}

func (tp turnProfile) maxTokens() int {
	if tp.p == nil {
		return 0
	}
	return tp.p.MaxTokens
}

func (tp turnProfile) name() string {
	if tp.p == nil {
		return ""
	}
	return tp.p.Name
}

// turnBudget implements agent.Budget for one turn: limits from the
// configuration, counts in Redis shared by every replica.
type turnBudget struct {
	b      *Bot
	k      session.ThreadKey
	who    inbound
	tp     turnProfile
	limits []session.Limit
}

// budgetFor is the turn's budget (nil when nothing is metered).
func (b *Bot) budgetFor(k session.ThreadKey, who inbound, tp turnProfile) agent.Budget {
	tb := &turnBudget{b: b, k: k, who: who, tp: tp}
	if cfg := b.opts.Profiles.Config; cfg != nil {
		tb.limits = limitsOf(cfg.Budgets.Workspace, session.ScopeWorkspace)
		tb.limits = append(tb.limits, limitsOf(cfg.ChannelLimits(tp.p), session.ScopeChannel)...)
		tb.limits = append(tb.limits, limitsOf(cfg.Budgets.Person, session.ScopePerson)...)
	}
	return tb
}

func limitsOf(l profile.Limits, scope string) []session.Limit {
	var out []session.Limit
	add := func(period string, cost bool, max int64) {
		if max > 0 {
			out = append(out, session.Limit{Scope: scope, Period: period, Cost: cost, Max: max})
		}
	}
	add(session.PeriodDay, false, l.DailyTokens)
	add(session.PeriodMonth, false, l.MonthlyTokens)
	add(session.PeriodDay, true, int64(l.DailyCost*1e6+0.5))
	add(session.PeriodMonth, true, int64(l.MonthlyCost*1e6+0.5))
	return out
}

// Allow checks the limits in one round trip; past 80 % of one the person
// is told once a day, at 100 % the call is refused.
func (tb *turnBudget) Allow(ctx context.Context) error {
	if len(tb.limits) == 0 {
		return nil
	}
	now := tb.b.opts.Now()
	v, err := tb.b.store.CheckBudget(ctx, tb.k.Team, tb.k.Channel, tb.who.User, tb.limits, now)
	if err != nil {
		return err
	}
	if v.Over != nil {
		tb.b.m.Usage.BudgetRefusals.WithLabelValues(v.Over.Scope).Inc()
		tb.b.log.Info("bot: over budget; refusing the model call", append(threadAttrs(tb.k.Team, tb.k.Channel, tb.k.ThreadTS),
			"scope", v.Over.Scope, "period", v.Over.Period, "used", v.Used, "max", v.Over.Max)...)
		return &agent.OverBudgetError{Notice: tb.refusal(*v.Over, v.Used, now)}
	}
	if v.Warn != nil {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		tb.b.ephemeral(nctx, tb.who, fmt.Sprintf("Heads-up: %s is %d %% used (%s of %s). It resets %s.",
			tb.b.limitName(*v.Warn), v.WarnUsed*100/max(v.Warn.Max, 1), tb.b.amount(*v.Warn, v.WarnUsed), tb.b.amount(*v.Warn, v.Warn.Max), resetText(v.Warn.Reset(now))))
	}
	return nil
}

func (tb *turnBudget) refusal(l session.Limit, used int64, now time.Time) string {
	return fmt.Sprintf("I can't answer now: %s is used up (%s of %s). It resets %s; an admin can see usage with `/bobbin usage`.",
		tb.b.limitName(l), tb.b.amount(l, used), tb.b.amount(l, l.Max), resetText(l.Reset(now)))
}

func (b *Bot) limitName(l session.Limit) string { return l.String() }

// amount formats a count of a limit's unit.
func (b *Bot) amount(l session.Limit, n int64) string {
	if l.Cost {
		return b.money(n)
	}
	return fmt.Sprintf("%d tokens", n)
}

// money formats micros of the configured currency.
func (b *Bot) money(micros int64) string {
	cur := ""
	if cfg := b.opts.Profiles.Config; cfg != nil && cfg.Currency != "" {
		cur = " " + cfg.Currency
	}
	return fmt.Sprintf("%.2f%s", float64(micros)/1e6, cur)
}

func resetText(t time.Time) string {
	return "at " + t.UTC().Format("2006-01-02 15:04") + " UTC"
}

// Spent records a call's usage (tokens and cost) in Redis and Prometheus.
func (tb *turnBudget) Spent(ctx context.Context, model string, u provider.Usage) {
	cost, priced := tb.b.opts.Profiles.Config.Cost(model, int64(u.InputTokens), int64(u.CacheReadTokens), int64(u.OutputTokens))
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := tb.b.store.RecordUsage(rctx, tb.k.Team, session.UsageRecord{Channel: tb.k.Channel, User: tb.who.User, Profile: tb.tp.name(),
		Model: model, InputTokens: int64(u.InputTokens), CachedTokens: int64(u.CacheReadTokens), OutputTokens: int64(u.OutputTokens), CostMicros: cost},
		tb.b.opts.Now(), tb.b.opts.Profiles.Config.RetentionOrDefault())
	if err != nil {
		tb.b.log.Warn("bot: recording usage failed", append(threadAttrs(tb.k.Team, tb.k.Channel, tb.k.ThreadTS), "err", err)...)
	}
	um := tb.b.m.Usage
	um.Tokens.WithLabelValues(model, "input").Add(float64(u.InputTokens - u.CacheReadTokens))
	um.Tokens.WithLabelValues(model, "cached_input").Add(float64(u.CacheReadTokens))
	um.Tokens.WithLabelValues(model, "output").Add(float64(u.OutputTokens))
	if priced {
		um.Cost.WithLabelValues(model).Add(float64(cost) / 1e6)
	}
}

// tracer is Options.Tracer or the no-op tracer.
func (b *Bot) tracer() trace.Tracer {
	if b.opts.Tracer != nil {
		return b.opts.Tracer
	}
	return noopTracer
}

var noopTracer = noop.NewTracerProvider().Tracer("")

// startTurnSpan opens the turn's invoke_agent span (GenAI conventions) and
// returns the logger of the turn carrying its trace id.
func (b *Bot) startTurnSpan(ctx context.Context, k session.ThreadKey, tp turnProfile, log *slog.Logger) (context.Context, trace.Span, *slog.Logger) {
	ctx, span := b.tracer().Start(ctx, "invoke_agent bobbin", trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		return ctx, span, log
	}
	span.SetAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "bobbin"),
		attribute.String("gen_ai.request.model", tp.model), attribute.String("slack.team.id", k.Team),
		attribute.String("slack.channel.id", k.Channel), attribute.String("slack.thread.ts", k.ThreadTS))
	if n := tp.name(); n != "" {
		span.SetAttributes(attribute.String("bobbin.profile", n))
	}
	return ctx, span, log.With("trace_id", span.SpanContext().TraceID().String())
}

// endTurnSpan records the turn's outcome and usage and ends its span.
func endTurnSpan(span trace.Span, res agent.Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("bobbin.outcome", res.Outcome.String()), attribute.Int("bobbin.steps", res.Steps))
	if res.Usage.Known {
		span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", res.Usage.InputTokens), attribute.Int("gen_ai.usage.output_tokens", res.Usage.OutputTokens))
	}
	if err != nil && res.Outcome == agent.Failed {
		span.SetStatus(codes.Error, err.Error())
	}
}
