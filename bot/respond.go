package bot

import (
	"context"

	"github.com/bobbinbot/bobbin/agent/profile"
)

// kindChannel is a top-level channel message that does not mention the
// bot: it starts a turn only where the channel's profile says respond: all.
const kindChannel = "channel"

// respondMode applies the channel's profile to which messages start turns
// (PROFILES_CONFIG respond): mention (thread replies are only context),
// thread (replies in the bot's threads start turns), all (every message in
// the channel does, only in a channel bound to the profile by an admin or
// named in channels:; elsewhere all means thread). Without a profile, or a profile without respond,
// THREAD_FOLLOWUPS decides as before. ok=false drops the message.
func (b *Bot) respondMode(ctx context.Context, m inbound, needsSession bool) (inbound, bool, bool) {
	if b.opts.Profiles.Config == nil {
		return m, needsSession, m.Kind != kindChannel
	}
	switch m.Kind {
	case kindChannel, kindReply, kindContext:
	default:
		return m, needsSession, true
	}
	respond := ""
	if p, src := b.resolveProfile(ctx, m.Team, m.Channel); p != nil {
		respond = p.Respond
		if respond == profile.RespondAll && src != profile.SourceBinding && src != profile.SourceChannel {
			// Every message of a channel only where someone chose that
			// channel: a default profile answers threads, not the room.
			respond = profile.RespondThread
		}
	}
	switch m.Kind {
	case kindChannel:
		if respond != profile.RespondAll {
			return m, false, false
		}
		m.Kind = kindMention // a new thread under the message
		return m, false, true
	case kindReply:
		if respond == profile.RespondMention {
			m.Kind = kindContext
		}
	case kindContext:
		if respond == profile.RespondThread || respond == profile.RespondAll {
			m.Kind = kindReply
		}
	}
	if respond == profile.RespondAll && m.Kind == kindReply {
		needsSession = false // every message in the channel, its threads too
	}
	return m, needsSession, true
}
