package bot

import (
	"context"
	"encoding/json"
)

// UngovernedCalls returns, by method, the Web API calls of b that reached
// Slack without asking the governor first (only slack-go's own
// apps.connections.open and auth.test at start-up should).
func UngovernedCalls(b *Bot) map[string]int {
	return b.gov.Ungoverned()
}

// PickClientToken is the token a Web API call of b in team would carry
// now (loading and refreshing the installation as a call does).
func PickClientToken(ctx context.Context, b *Bot, team string) (string, error) {
	return b.ws.Token(ctx, team)
}

// TeamName is the workspace name the system prompt of team would use.
func TeamName(ctx context.Context, b *Bot, team string) string { return b.people.TeamName(ctx, team) }

// AdmitEvent hands b an events_api payload as the socket loop does and
// reports whether b acks it.
func AdmitEvent(ctx context.Context, b *Bot, payload json.RawMessage) bool {
	ack, _ := b.admitEvent(ctx, ctx, payload, 0)
	return ack
}
