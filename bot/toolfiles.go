package bot

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/bot/mrkdwn"
	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/session"
)

// Files tools return (MCP embedded resources, images, readable resource
// links) are uploaded into the thread with Slack's external upload flow:
// files.getUploadURLExternal, the bytes POSTed to that URL, then
// files.completeUploadExternal sharing it in the thread; each step spends
// from the governor's budget. The model gets a line saying the file was
// shared (name, type, size), never the bytes. A file over
// Options.ToolFileMaxBytes is not uploaded: the model and the person get a
// note saying so.

// DefaultToolFileMaxBytes is the largest tool file uploaded
// (TOOL_FILE_MAX_BYTES).
const DefaultToolFileMaxBytes = 20 << 20

// threadFiles shares a turn's tool files in its thread.
type threadFiles struct {
	b   *Bot
	k   session.ThreadKey
	max int64
}

var _ agent.FileSharer = threadFiles{}

// toolFiles is the sharer of tool's calls in k; false for a private tool
// in a channel, whose result goes to the asker only (private.go): its
// files stay placeholders rather than go up for the whole channel.
func (b *Bot) toolFiles(k session.ThreadKey, tool agent.Tool) (threadFiles, bool) {
	if ht, ok := tool.(agent.HintedTool); ok && ht.Hints().Private && !inDM(k.Channel) {
		return threadFiles{}, false
	}
	n := b.opts.ToolFileMaxBytes
	if n <= 0 {
		n = DefaultToolFileMaxBytes
	}
	return threadFiles{b: b, k: k, max: n}, true
}

func (s threadFiles) MaxFileBytes() int64 { return s.max }

// ShareFile uploads f into the thread and returns the model's line.
func (s threadFiles) ShareFile(ctx context.Context, f agent.ToolFile) string {
	kind := cmp.Or(f.MimeType, "unknown type")
	if f.Size > s.max || f.Data == nil {
		note := fmt.Sprintf("The file %s (%s, %s) from %s was not shared: it is larger than the %s limit for tool files.",
			f.Name, kind, humanBytes(f.Size), f.Tool, humanBytes(s.max))
		s.b.failNotice(ctx, s.k, inbound{}, note)
		return "[" + note + " The person was told.]"
	}
	if err := s.upload(ctx, f); err != nil {
		s.b.log.Warn("bot: tool file not uploaded", "team", s.k.Team, "channel", s.k.Channel, "thread", s.k.ThreadTS,
			"tool", f.Tool, "file", f.Name, "err", err)
		return fmt.Sprintf("[file %s (%s, %s) could not be shared in Slack; the person did not get it]", f.Name, kind, humanBytes(f.Size))
	}
	return fmt.Sprintf("[file %s (%s, %s) was shared in this thread; the person can open it there. Do not repeat its contents or refer to a path]",
		f.Name, kind, humanBytes(f.Size))
}

// upload runs the external upload flow, each step within the budget.
func (s threadFiles) upload(ctx context.Context, f agent.ToolFile) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	k := s.k
	var up *slack.GetUploadURLExternalResponse
	err := s.b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.FilesGetUploadURLExternal}, func(ctx context.Context, api *slack.Client) error {
		var err error
		up, err = api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: f.Name, FileSize: len(f.Data)})
		return err
	})
	if err != nil {
		return fmt.Errorf("files.getUploadURLExternal: %w", err)
	}
	err = s.b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.FilesUploadBytes}, func(ctx context.Context, api *slack.Client) error {
		return api.UploadToURL(ctx, slack.UploadToURLParameters{UploadURL: up.UploadURL, Reader: bytes.NewReader(f.Data), Filename: f.Name})
	})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	err = s.b.slack.Do(ctx, slackapi.Call{Team: k.Team, Method: slackapi.FilesCompleteUploadExternal, Channel: k.Channel}, func(ctx context.Context, api *slack.Client) error {
		_, err := api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{
			Files: []slack.FileSummary{{ID: up.FileID, Title: f.Name}}, Channel: k.Channel, ThreadTimestamp: k.ThreadTS,
			InitialComment: "From " + mrkdwn.EscapeText(f.Tool) + ":",
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("files.completeUploadExternal: %w", err)
	}
	s.b.log.Debug("bot: tool file shared", slog.String("team", k.Team), slog.String("thread", k.ThreadTS), slog.String("file", f.Name), slog.Int("bytes", len(f.Data)))
	return nil
}

// humanBytes is n as people read sizes (KB and MB of 1024).
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
