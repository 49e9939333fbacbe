package bot

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/bobbinbot/bobbin/agent/access"
	"github.com/bobbinbot/bobbin/bot/admin"
	"github.com/bobbinbot/bobbin/bot/ask"
	"github.com/bobbinbot/bobbin/bot/people"
)

// The root's side of bot/admin (/bobbin, the add-server form, the App
// Home): what administration needs of the app (people, the audit log,
// Connect prompts, profiles), wired once.

// jobTimeout bounds work after an ack (a slash command answered later, a
// probe, a listing that connects to servers).
const jobTimeout = 45 * time.Second

func (b *Bot) newAdmin() *admin.Admin {
	return admin.New(admin.Options{
		API:    b.slack,
		MCP:    b.opts.MCP,
		Store:  b.store,
		People: adminPeople{b.people},
		Audit:  b.audit,
		Access: func(ctx context.Context, team, channel, user string) access.Access {
			return b.accessFor(ctx, team, channel, []personRef{{user: user}})
		},
		ConnectBlocks:   ask.ConnectBlocks,
		RememberConnect: b.ask.RememberConnect,
		Profiles:        b.opts.Profiles.Config,
		Model:           b.opts.Model,
		Profile:         b.resolveProfile,
		Jobs:            b.jobs,
		HTTPClient:      b.webhookClient(),
		Logger:          b.log,
		Now:             b.opts.Now,
	})
}

// adminPeople is the people.Directory as bot/admin sees people.
type adminPeople struct{ d *people.Directory }

func (p adminPeople) Standing(ctx context.Context, team, user, userTeam string) admin.Standing {
	r, why := p.d.Role(ctx, team, user, userTeam)
	return admin.Standing{Admin: r == people.Admin, MayUse: r != people.None || why == people.Guest,
		Unchecked: why == people.LookupFailed, Why: why.String()}
}

func (p adminPeople) CheckGroup(ctx context.Context, team, group string) error {
	_, err := p.d.Members(ctx, team, group, true)
	switch {
	case errors.Is(err, people.ErrNoSuchGroup):
		return admin.ErrNoSuchGroup
	case errors.Is(err, people.ErrGroupsNeedPlan):
		return admin.ErrGroupsNeedPlan
	}
	return err
}

// webhookClient carries response_url answers (not Web API calls: no
// governor).
func (b *Bot) webhookClient() *http.Client {
	if b.opts.HTTPClient != nil {
		return b.opts.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}
