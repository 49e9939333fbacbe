package bot

import "maps"

// UngovernedCalls returns, by method, the Web API calls of b that reached
// Slack without asking the governor first (only slack-go's own
// apps.connections.open and auth.test at start-up should).
func UngovernedCalls(b *Bot) map[string]int {
	b.gov.mu.Lock()
	defer b.gov.mu.Unlock()
	return maps.Clone(b.gov.ungoverned)
}
