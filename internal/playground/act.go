package playground

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// What the page does, each as the person it names would in Slack: post
// (with mentions, files, or a slash command), click, submit or close a
// modal, react, open the assistant pane.

// Limits of what the page may send.
const (
	maxTextRunes = 4000 // Slack's composer allows more; a playground needs no more
	maxFiles     = 5
	maxFileBytes = 2 << 20
)

type postReq struct {
	As      string     `json:"as"`
	Channel string     `json:"channel"`
	Thread  string     `json:"thread"`
	Text    string     `json:"text"`
	Files   []fileBody `json:"files"`
}

type fileBody struct {
	Name string `json:"name"`
	Data string `json:"data"` // base64
}

// who checks the acting person and channel of a request.
func (s *Server) who(w http.ResponseWriter, as, channel string) (Person, bool) {
	p, ok := s.ws.person(as)
	if !ok {
		httpError(w, http.StatusBadRequest, "unknown person")
		return Person{}, false
	}
	if channel != "" && !s.ws.hasChannel(channel) {
		httpError(w, http.StatusBadRequest, "unknown channel")
		return Person{}, false
	}
	if strings.HasPrefix(channel, "D") && channel != p.DM {
		httpError(w, http.StatusForbidden, "that is someone else's direct message")
		return Person{}, false
	}
	return p, true
}

func (s *Server) handlePost(w http.ResponseWriter, r *http.Request) {
	var req postReq
	if !decode(w, r, &req) {
		return
	}
	me, ok := s.who(w, req.As, req.Channel)
	if !ok {
		return
	}
	text := strings.TrimSpace(req.Text)
	if !utf8.ValidString(text) || utf8.RuneCountInString(text) > maxTextRunes {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("messages are at most %d characters of UTF-8 text", maxTextRunes))
		return
	}
	if strings.HasPrefix(text, "/") && len(req.Files) == 0 {
		s.slash(w, me, req.Channel, text)
		return
	}
	files, msg := s.files(req.Files)
	if msg != "" {
		httpError(w, http.StatusBadRequest, msg)
		return
	}
	if text == "" && len(files) == 0 {
		httpError(w, http.StatusBadRequest, "write something first")
		return
	}
	if req.Thread != "" && !s.hasMessage(req.Channel, req.Thread) {
		httpError(w, http.StatusBadRequest, "no such thread")
		return
	}
	body := s.slackText(text)
	p, err := s.slack.Post(slackemu.UserPost{
		Team: s.ws.TeamID, Channel: req.Channel, User: me.ID, Text: body, ThreadTS: req.Thread,
		Files: files, Mention: strings.Contains(body, "<@"+s.ws.BotUser+">"),
	})
	if err != nil {
		httpError(w, http.StatusBadRequest, "Slack refused the message: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"ts": p.TS})
}

// mentionRE finds @handles in what the person typed.
var mentionRE = regexp.MustCompile(`(?i)(^|[^\w@])@([a-z0-9][a-z0-9._-]*)`)

// slackText turns composer text into Slack's message text: &, < and >
// escaped as Slack clients send them, @handles of the bot and the
// workspace's people turned into <@U…> mentions.
func (s *Server) slackText(text string) string {
	text = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(text)
	return mentionRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := mentionRE.FindStringSubmatch(m)
		name := strings.ToLower(sub[2])
		if name == s.ws.BotName {
			return sub[1] + "<@" + s.ws.BotUser + ">"
		}
		for _, p := range s.ws.People {
			if p.Name == name {
				return sub[1] + "<@" + p.ID + ">"
			}
		}
		return m
	})
}

// files decodes uploaded files; a message for the person when they are
// not acceptable.
func (s *Server) files(in []fileBody) ([]slackemu.File, string) {
	if len(in) > maxFiles {
		return nil, fmt.Sprintf("at most %d files at once", maxFiles)
	}
	var out []slackemu.File
	for _, f := range in {
		name := path.Base(strings.ReplaceAll(f.Name, "\\", "/"))
		if name == "" || name == "." || name == "/" || !utf8.ValidString(name) || len(name) > 255 {
			return nil, "a file needs a name"
		}
		data, err := base64.StdEncoding.DecodeString(f.Data)
		if err != nil {
			return nil, "file " + name + " is not base64"
		}
		if len(data) > maxFileBytes {
			return nil, fmt.Sprintf("file %s is larger than %d MiB", name, maxFileBytes>>20)
		}
		out = append(out, slackemu.File{Name: name, Content: data})
	}
	return out, ""
}

func (s *Server) hasMessage(channel, ts string) bool {
	for _, m := range s.slack.Thread(channel, ts) {
		if m.TS == ts {
			return true
		}
	}
	return false
}

// slash runs a slash command typed in the composer. Only the app's
// command exists in this workspace; anything else gets Slack's answer.
func (s *Server) slash(w http.ResponseWriter, me Person, channel, text string) {
	cmd, args, _ := strings.Cut(text, " ")
	if cmd != "/bobbin" {
		httpError(w, http.StatusBadRequest, cmd+" is not a valid command. In this playground the only command is /bobbin.")
		return
	}
	// The reply shows up as an ephemeral message once the bot acks; the
	// page hears of it through the live updates.
	s.slack.SlashCommand(s.ws.TeamID, channel, me.ID, cmd, strings.TrimSpace(args))
	writeJSON(w, http.StatusAccepted, map[string]string{})
}

type clickReq struct {
	As       string `json:"as"`
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	ViewID   string `json:"view_id"`
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
}

func (s *Server) handleClick(w http.ResponseWriter, r *http.Request) {
	var req clickReq
	if !decode(w, r, &req) {
		return
	}
	me, ok := s.who(w, req.As, req.Channel)
	if !ok {
		return
	}
	var err error
	switch {
	case req.ViewID != "":
		_, err = s.slack.ClickView(s.ws.TeamID, me.ID, req.ViewID, req.ActionID, req.Value)
	case req.Value == FeedbackPositive || req.Value == FeedbackNegative:
		_, err = s.slack.ClickFeedback(s.ws.TeamID, me.ID, req.Channel, req.TS, req.ActionID, req.Value == FeedbackPositive)
	default:
		_, err = s.slack.Click(s.ws.TeamID, me.ID, req.Channel, req.TS, req.ActionID, req.Value)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "nothing to click there")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{})
}

// submitReq carries the form's inputs by block id: a string, or a list
// of option values (checkboxes, multi-selects).
type submitReq struct {
	As     string         `json:"as"`
	ViewID string         `json:"view_id"`
	Values map[string]any `json:"values"`
}

// inputValue checks one submitted input: a string or a list of strings.
func inputValue(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return v, utf8.ValidString(v) && utf8.RuneCountInString(v) <= maxTextRunes
	case []any:
		if len(v) > 100 {
			return nil, false
		}
		out := make([]string, 0, len(v))
		for _, x := range v {
			s, ok := x.(string)
			if !ok || !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxTextRunes {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// submitWait bounds how long a submission waits for the bot's answer
// (Slack gives the app 3 s).
const submitWait = 5 * time.Second

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	var req submitReq
	if !decode(w, r, &req) {
		return
	}
	me, ok := s.who(w, req.As, "")
	if !ok {
		return
	}
	values := make(map[string]any, len(req.Values))
	for block, v := range req.Values {
		val, ok := inputValue(v)
		if !ok {
			httpError(w, http.StatusBadRequest, "field values are at most 4000 characters of UTF-8 text (or lists of them)")
			return
		}
		values[block] = val
	}
	in, err := s.slack.SubmitViewInputs(s.ws.TeamID, me.ID, req.ViewID, values)
	if err != nil {
		httpError(w, http.StatusBadRequest, "that form is no longer open")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), submitWait)
	defer cancel()
	res, err := in.Wait(ctx)
	if err != nil {
		httpError(w, http.StatusGatewayTimeout, "Bobbin did not answer the form in time; Slack would show an error.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"action": res.ResponseAction, "errors": res.Errors})
}

type closeReq struct {
	As     string `json:"as"`
	ViewID string `json:"view_id"`
}

func (s *Server) handleClose(w http.ResponseWriter, r *http.Request) {
	var req closeReq
	if !decode(w, r, &req) {
		return
	}
	me, ok := s.who(w, req.As, "")
	if !ok {
		return
	}
	if err := s.slack.CloseView(s.ws.TeamID, me.ID, req.ViewID); err != nil {
		httpError(w, http.StatusBadRequest, "that form is no longer open")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{})
}

type reactReq struct {
	As      string `json:"as"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	Name    string `json:"name"`
	Add     bool   `json:"add"`
}

// reactionRE is what an emoji name may look like.
var reactionRE = regexp.MustCompile(`^[a-z0-9_+\-]{1,64}$`)

func (s *Server) handleReact(w http.ResponseWriter, r *http.Request) {
	var req reactReq
	if !decode(w, r, &req) {
		return
	}
	me, ok := s.who(w, req.As, req.Channel)
	if !ok {
		return
	}
	if !reactionRE.MatchString(req.Name) {
		httpError(w, http.StatusBadRequest, "not an emoji name")
		return
	}
	if err := s.slack.React(req.Channel, req.TS, me.ID, req.Name, req.Add); err != nil {
		httpError(w, http.StatusBadRequest, "cannot react there")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{})
}

type assistantReq struct {
	As      string `json:"as"`
	Context string `json:"context"` // the channel the person was viewing
}

func (s *Server) handleAssistant(w http.ResponseWriter, r *http.Request) {
	var req assistantReq
	if !decode(w, r, &req) {
		return
	}
	me, ok := s.who(w, req.As, "")
	if !ok {
		return
	}
	ctxChannel := req.Context
	if !s.ws.hasChannel(ctxChannel) || strings.HasPrefix(ctxChannel, "D") {
		ctxChannel = ""
	}
	p := s.slack.AssistantThreadStarted(s.ws.TeamID, me.ID, me.DM, ctxChannel)
	writeJSON(w, http.StatusOK, map[string]string{"channel": me.DM, "ts": p.TS})
}
