package slackemu

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Posting as people (and other apps) do: messages with files, seeded
// thread history, edits and deletions. Mention and Message are the short
// forms of Post.

// UserPost is a message someone posts, for Post.
type UserPost struct {
	Team, Channel, User string
	Text                string
	ThreadTS            string // a reply in this thread when set
	// TS, when set, is the message's ts ("%d.%06d", e.g. for history in
	// the past); it must be unused in the channel.
	TS string
	// Files are uploaded (bytes given by the test) and shared with the
	// message: events carry them in Slack's shape (Connect stubs for
	// File.ConnectStub), a person's message gets subtype file_share.
	Files []File
	// Mention makes it an app_mention, as Mention does.
	Mention bool
	// Silent stores the message without delivering any event (a thread's
	// earlier messages, written before the app was asked).
	Silent bool
	// AsApp posts it as this app's bot in Team (the bot's own earlier
	// messages); such posts are always silent.
	AsApp bool
	// BotID and BotName post it as another app's bot (bot_id,
	// bot_profile); Subtype "bot_message" makes it a classic bot message.
	BotID, BotName string
	// Subtype overrides the message subtype.
	Subtype string
	// SourceTeam overrides the event's source_team (default: the user's
	// team).
	SourceTeam string
}

var tsRE = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{6}$`)

// Post stores a message and delivers the events the app would get: an
// app_mention for UserPost.Mention (and a message event too under
// Options.MessageEventsOnMention), a message event in channels the bot is
// in and DMs, nothing when Silent or AsApp. Posted.Files holds the stored
// files with their URLs.
func (s *Server) Post(p UserPost) (Posted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.teams[p.Team] == nil {
		return Posted{}, fmt.Errorf("slackemu: Post: unknown team %q", p.Team)
	}
	if s.channels[p.Channel] == nil {
		return Posted{}, fmt.Errorf("slackemu: Post: unknown channel %q", p.Channel)
	}
	if p.TS != "" {
		if !tsRE.MatchString(p.TS) {
			return Posted{}, fmt.Errorf("slackemu: Post: bad ts %q", p.TS)
		}
		if s.msgs[msgKey(p.Channel, p.TS)] != nil {
			return Posted{}, fmt.Errorf("slackemu: Post: ts %s is taken in %s", p.TS, p.Channel)
		}
	}
	if p.ThreadTS != "" && s.msgs[msgKey(p.Channel, p.ThreadTS)] == nil {
		return Posted{}, fmt.Errorf("slackemu: Post: no thread %s in %s", p.ThreadTS, p.Channel)
	}
	return s.postLocked(p)
}

// postLocked stores and delivers a post (arguments checked by the caller).
func (s *Server) postLocked(p UserPost) (Posted, error) {
	user := p.User
	if p.AsApp {
		user, p.BotID, _ = s.botIdentityLocked(p.Team)
		p.BotName, p.Silent = "", true
	}
	var files []*fileState
	for _, f := range p.Files {
		fs, err := s.prepareFileLocked(f, p.Team, user)
		if err != nil {
			return Posted{}, err
		}
		files = append(files, fs)
	}
	text := p.Text
	if p.Mention {
		bot, _, _ := s.botIdentityLocked(p.Team)
		if mention := "<@" + bot + ">"; !strings.Contains(text, mention) {
			text = mention + " " + text
		}
	}
	m := &Message{Team: p.Team, Channel: p.Channel, ThreadTS: p.ThreadTS, User: user, BotID: p.BotID, botName: p.BotName, Text: text, Via: "user", Subtype: p.Subtype}
	if p.TS != "" {
		m.TS = p.TS
		s.bumpTSLocked(p.TS)
	} else {
		m.TS = s.newTSLocked()
	}
	if p.BotID == "" && text != "" {
		m.Blocks = richTextBlocks(text)
	}
	for _, fs := range files {
		fs.Channels = append(fs.Channels, p.Channel)
		s.storeFileLocked(fs)
		m.Files = append(m.Files, fs.ID)
	}
	if m.Subtype == "" && len(files) > 0 && p.BotID == "" {
		m.Subtype = "file_share"
	}
	m.sourceTeam = p.SourceTeam
	s.recordVersionLocked(m, "user")
	s.insertMessageLocked(m)

	out := Posted{TS: m.TS}
	for _, fs := range files {
		out.Files = append(out.Files, copyFile(fs))
	}
	if p.Silent {
		return out, nil
	}
	c := s.channels[p.Channel]
	member := c != nil && (c.BotMember || c.IsIM())
	if p.Mention {
		ev := s.userEventLocked(m, "app_mention")
		delete(ev, "channel_type")
		delete(ev, "subtype")
		out.Envelope, out.EventID = s.deliverEventLocked(p.Team, ev)
		if s.opts.MessageEventsOnMention && member {
			out.MessageEnvelope, out.MessageEventID = s.deliverEventLocked(p.Team, s.userEventLocked(m, "message"))
		}
		return out, nil
	}
	if member {
		out.Envelope, out.EventID = s.deliverEventLocked(p.Team, s.userEventLocked(m, "message"))
	}
	return out, nil
}

// bumpTSLocked keeps issued timestamps above a seeded one.
func (s *Server) bumpTSLocked(ts string) {
	sec, frac, _ := strings.Cut(ts, ".")
	a, _ := strconv.ParseInt(sec, 10, 64)
	b, _ := strconv.ParseInt(frac, 10, 64)
	if us := a*1e6 + b; us > s.lastTS {
		s.lastTS = us
	}
}

// insertMessageLocked stores a message in ts order (seeded history may
// be older than what is stored).
func (s *Server) insertMessageLocked(m *Message) {
	s.msgs[msgKey(m.Channel, m.TS)] = m
	list := s.order[m.Channel]
	i := len(list)
	for i > 0 && tsLess(m.TS, list[i-1].TS) {
		i--
	}
	s.order[m.Channel] = slices.Insert(list, i, m)
	s.trimChannelLocked(m.Channel)
	s.changedLocked()
}

// tsLess compares two "%d.%06d" timestamps.
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

// EditMessage changes a stored message's text as its author would in
// Slack (marked edited, a new History version). No event is delivered.
func (s *Server) EditMessage(channel, ts, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, ts)]
	if m == nil || m.Deleted {
		return fmt.Errorf("slackemu: EditMessage: no message %s/%s", channel, ts)
	}
	m.Text, m.MarkdownText = text, ""
	if m.BotID == "" {
		m.Blocks = richTextBlocks(text)
	}
	m.Edited = true
	s.recordVersionLocked(m, "edit")
	return nil
}

// DeleteMessage deletes a stored message as its author (or an admin)
// would. A thread parent with replies stays as Slack's tombstone in
// conversations.replies. No event is delivered.
func (s *Server) DeleteMessage(channel, ts string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, ts)]
	if m == nil || m.Deleted {
		return fmt.Errorf("slackemu: DeleteMessage: no message %s/%s", channel, ts)
	}
	m.Deleted, m.Streaming = true, false
	s.changedLocked()
	return nil
}
