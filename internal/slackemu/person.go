package slackemu

import (
	"fmt"
	"slices"
	"strings"
)

// What a person does in a Slack client that tests rarely need but a
// browser front end (the playground) does: react to a message, close a
// modal, and follow the server's changes and Web API calls as they
// happen.

// Changed returns a channel that is closed at the server's next state
// change (a message, edit, ephemeral, view, call, connection, …). Call it
// again after each close; it never blocks.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cond
}

// JournalSince returns the journaled calls with Seq above seq, oldest
// first, at most limit of them (the newest; limit <= 0 means all).
func (s *Server) JournalSince(seq uint64, limit int) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.journal, seq+1, func(c Call, v uint64) int {
		switch {
		case c.Seq < v:
			return -1
		case c.Seq > v:
			return 1
		}
		return 0
	})
	out := s.journal[i:]
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return slices.Clone(out)
}

// React adds (add) or removes a person's reaction name (an emoji name
// without colons) on a message, as clicking an emoji in Slack does. It
// delivers no event: Bobbin's manifest subscribes to no reaction events.
func (s *Server) React(channel, ts, user, name string, add bool) error {
	name = strings.Trim(name, ":")
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return fmt.Errorf("slackemu: React: invalid reaction name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[msgKey(channel, ts)]
	if m == nil || m.Deleted {
		return fmt.Errorf("slackemu: React: no message %s/%s", channel, ts)
	}
	if s.users[user] == nil {
		return fmt.Errorf("slackemu: React: unknown user %q", user)
	}
	has := slices.Contains(m.Reactions[name], user)
	switch {
	case add && !has:
		if m.Reactions == nil {
			m.Reactions = map[string][]string{}
		}
		if len(m.Reactions) >= maxReactionNames && m.Reactions[name] == nil {
			return fmt.Errorf("slackemu: React: too many reactions on %s/%s", channel, ts)
		}
		m.Reactions[name] = append(m.Reactions[name], user)
	case !add && has:
		i := slices.Index(m.Reactions[name], user)
		m.Reactions[name] = slices.Delete(m.Reactions[name], i, i+1)
		if len(m.Reactions[name]) == 0 {
			delete(m.Reactions, name)
		}
	}
	s.changedLocked()
	return nil
}

// maxReactionNames is Slack's limit of distinct reactions on a message.
const maxReactionNames = 50

// CloseView closes user's open view viewID and the views pushed above it,
// as the modal's close button does. Slack sends view_closed only to apps
// that set notify_on_close; this emulator sends none.
func (s *Server) CloseView(team, user, viewID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := team + "/" + user
	stack := s.stacks[key]
	i := slices.IndexFunc(stack, func(v *View) bool { return v.ID == viewID })
	if i < 0 {
		return fmt.Errorf("slackemu: CloseView: no open view %s for %s", viewID, user)
	}
	for _, v := range stack[i:] {
		v.Closed = true
	}
	if i == 0 {
		delete(s.stacks, key)
	} else {
		s.stacks[key] = stack[:i]
	}
	s.changedLocked()
	return nil
}

// FileMeta returns a stored file without its Content (cheap for listing
// the files of many messages; FileInfo has the bytes).
func (s *Server) FileMeta(id string) (File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[id]
	if f == nil {
		return File{}, false
	}
	c := f.File
	c.Content = nil
	c.Channels = slices.Clone(f.Channels)
	return c, true
}
