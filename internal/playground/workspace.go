package playground

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/bobbinbot/bobbin/internal/slackemu"
)

// Roles of the people in the playground workspace, as the user picker
// shows them.
const (
	RoleMember = "member"
	RoleGuest  = "guest"
	RoleAdmin  = "admin"
)

// Person is someone the page lets you be.
type Person struct {
	ID       string `json:"id"`
	Name     string `json:"name"`      // handle, e.g. "alice"
	RealName string `json:"real_name"` // e.g. "Alice Archer"
	Role     string `json:"role"`      // RoleMember, RoleGuest or RoleAdmin
	// About says, for the picker, what this person may do with the bot.
	About string `json:"about"`
	// DM is the id of this person's direct message with the bot.
	DM string `json:"dm"`
}

// Room is a channel of the workspace.
type Room struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Topic is shown in the channel header.
	Topic string `json:"topic"`
}

// Workspace is the playground's Slack workspace: its people, its channels
// and the bot's identity in it.
type Workspace struct {
	TeamID   string   `json:"team_id"`
	TeamName string   `json:"team_name"`
	Domain   string   `json:"-"`
	BotUser  string   `json:"bot_user"`
	BotID    string   `json:"-"`
	BotName  string   `json:"bot_name"`
	People   []Person `json:"people"`
	Rooms    []Room   `json:"rooms"`
}

// DefaultWorkspace is a workspace with two members, a guest, an admin,
// two channels the bot is in, and a DM with the bot for each person.
func DefaultWorkspace() Workspace {
	return Workspace{
		TeamID: "T0PLAYGND", TeamName: "Acme (playground)", Domain: "acme-playground",
		BotUser: "U0BOBBIN", BotID: "B0BOBBIN", BotName: "bobbin",
		People: []Person{
			{ID: "U0ALICE", Name: "alice", RealName: "Alice Archer", Role: RoleMember, DM: "D0ALICE",
				About: "Member: asks the bot, approves her own tool calls, lists MCP servers."},
			{ID: "U0BOB", Name: "bob", RealName: "Bob Baker", Role: RoleMember, DM: "D0BOB",
				About: "Another member: may not approve Alice's tool calls."},
			{ID: "U0ERIN", Name: "erin", RealName: "Erin Guest", Role: RoleGuest, DM: "D0ERIN",
				About: "Guest: may only list MCP servers."},
			{ID: "U0CAROL", Name: "carol", RealName: "Carol Admin", Role: RoleAdmin, DM: "D0CAROL",
				About: "Workspace admin: approves anyone's tool calls, adds and removes MCP servers."},
		},
		Rooms: []Room{
			{ID: "C0GENERAL", Name: "general", Topic: "Mention @bobbin to start a thread."},
			{ID: "C0RANDOM", Name: "random", Topic: "Anything goes. @bobbin is here too."},
		},
	}
}

// person finds a person by id.
func (w Workspace) person(id string) (Person, bool) {
	for _, p := range w.People {
		if p.ID == id {
			return p, true
		}
	}
	return Person{}, false
}

// hasChannel reports whether id is one of the workspace's channels or a
// person's DM.
func (w Workspace) hasChannel(id string) bool {
	for _, r := range w.Rooms {
		if r.ID == id {
			return true
		}
	}
	for _, p := range w.People {
		if p.DM == id {
			return true
		}
	}
	return false
}

// Credentials are the secrets the bot and the emulator share: fresh for
// every playground run, never shown on the page.
type Credentials struct {
	BotToken, AppToken     string
	ClientID, ClientSecret string
}

// NewCredentials makes random credentials.
func NewCredentials() Credentials {
	r := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	return Credentials{
		BotToken: "xoxb-play-" + r(12), AppToken: "xapp-1-A0BOBBIN-" + r(12),
		ClientID: "play." + r(6), ClientSecret: r(16),
	}
}

// Retention bounds for the emulator of a long-running playground.
const (
	messagesPerChannel = 500
	versionsPerMessage = 8
	journalEntries     = 1000
	fileBytes          = 64 << 20
)

// EmulatorOptions are the emulator settings for a playground: the
// workspace, the run's credentials, Slack's real timings and rate limits,
// the events real Slack sends (a message event beside app_mention, the
// bot's own posts echoed) and bounded memory.
func EmulatorOptions(w Workspace, c Credentials) slackemu.Options {
	team := slackemu.Team{
		ID: w.TeamID, Name: w.TeamName, Domain: w.Domain,
		BotUserID: w.BotUser, BotID: w.BotID, BotName: w.BotName, BotToken: c.BotToken,
	}
	for _, p := range w.People {
		u := slackemu.User{ID: p.ID, Name: p.Name, RealName: p.RealName, DisplayName: p.Name}
		switch p.Role {
		case RoleGuest:
			u.IsRestricted = true
		case RoleAdmin:
			u.IsAdmin = true
		}
		team.Users = append(team.Users, u)
		team.Channels = append(team.Channels, slackemu.Channel{ID: p.DM, IMUser: p.ID, BotMember: true})
	}
	for _, r := range w.Rooms {
		team.Channels = append(team.Channels, slackemu.Channel{ID: r.ID, Name: r.Name, BotMember: true})
	}
	return slackemu.Options{
		Teams:                  []slackemu.Team{team},
		AppID:                  "A0BOBBIN",
		AppToken:               c.AppToken,
		OAuth:                  slackemu.OAuthOptions{ClientID: c.ClientID, ClientSecret: c.ClientSecret},
		MessageEventsOnMention: true,
		EchoBotMessages:        true,
		HomeTabDisabled:        true, // as in manifest.yaml
		JournalLimit:           journalEntries,
		MessageLimit:           messagesPerChannel,
		VersionLimit:           versionsPerMessage,
		FileBytesLimit:         fileBytes,
	}
}
