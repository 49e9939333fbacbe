package main

import (
	"context"
	"errors"
	"sync/atomic"

	agentask "github.com/bobbinbot/bobbin/agent/ask"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/bot/ask"
	"github.com/bobbinbot/bobbin/mcp"
)

// slackSeams is what the MCP manager asks of the Slack side: Connect
// prompts (mcp.ConnectPrompter), servers' questions (mcp.Elicitor) and the
// end of an OAuth callback. The Manager is built before the Bot (the Bot
// takes it as its tool source), so the Bot is set once it exists; until
// then the seams refuse, which the Manager turns into "not connected" and
// "cancel".
type slackSeams struct{ b atomic.Pointer[bot.Bot] }

var errNoBot = errors.New("the Slack side is not running yet")

// PromptConnect implements mcp.ConnectPrompter.
func (s *slackSeams) PromptConnect(ctx context.Context, p mcp.ConnectPrompt) error {
	b := s.b.Load()
	if b == nil {
		return errNoBot
	}
	r := p.Caller
	return b.Prompts().PromptConnect(ctx, ask.ConnectRequest{Team: r.Team, User: r.User, Channel: r.Channel, Thread: r.Thread,
		Server: p.Server, Mode: p.Mode, URL: p.URL, Reason: p.Reason, Expires: p.Expires})
}

// Elicit implements mcp.Elicitor.
func (s *slackSeams) Elicit(ctx context.Context, q mcp.Elicitation) (mcp.ElicitAnswer, error) {
	b := s.b.Load()
	if b == nil {
		return mcp.ElicitAnswer{Action: mcp.ActionCancel}, errNoBot
	}
	r := q.Caller
	bq := ask.Question{Team: r.Team, User: r.User, Channel: r.Channel, Thread: r.Thread,
		Server: q.Server, Mode: q.Mode, Message: q.Message, URL: q.URL}
	if q.Schema != nil {
		bq.Fields, bq.AsksForSecret = q.Schema.Fields, q.Schema.AsksForSecret
	}
	ans, err := b.Prompts().Ask(ctx, bq)
	return mcp.ElicitAnswer{Action: ans.Action, Content: ans.Content}, err
}

// callbackDone is the OAuth callback's onDone: the person hears how it
// went and their App Home is refreshed (the waiting turn, on any replica,
// is woken by the Manager itself).
func (s *slackSeams) callbackDone(ctx context.Context, res mcp.CallbackResult, err error) {
	b := s.b.Load()
	if b == nil {
		return
	}
	var ce *mcp.CallbackError
	switch {
	case err == nil:
		b.Prompts().ConnectDone(ctx, res.Team, res.User, res.Server, "")
	case errors.As(err, &ce) && ce.Result.Team != "":
		b.Prompts().ConnectDone(ctx, ce.Result.Team, ce.Result.User, ce.Result.Server, ce.Msg)
	}
}

// checkForm is bot.Options.CheckForm: mcp's validator of form answers (a
// replica other than the asking one validates from the stored question).
func checkForm(fields []agentask.Field, content map[string]any) map[string]string {
	return mcp.ValidateElicitContent(&mcp.ElicitSchema{Fields: fields}, content)
}
