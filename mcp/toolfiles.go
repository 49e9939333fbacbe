package mcp

import (
	"cmp"
	"context"
	"fmt"
	"mime"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bobbinbot/bobbin/agent"
	"github.com/bobbinbot/bobbin/agent/access"
)

// Files a tool returns go to the person, not to the model: with a sharer
// on the call's context (agent.WithFileSharer: the bot uploads into the
// thread), embedded resources, images and resource links this server lets
// the bot read become files in the thread, and the model gets the
// sharer's line (shared: name, type, size; or why not) instead of the
// bytes. Without a sharer they stay placeholders.

// shareFiles shares res's files through s and returns the model's line
// for each content block it shared (by index).
func (t *remoteTool) shareFiles(ctx context.Context, s agent.FileSharer, res *mcp.CallToolResult) map[int]string {
	var notes map[int]string
	images := 0
	for i, c := range res.Content {
		f, ok := t.toolFile(ctx, s, c, &images)
		if !ok {
			continue
		}
		if notes == nil {
			notes = map[int]string{}
		}
		notes[i] = s.ShareFile(ctx, f)
	}
	return notes
}

// toolFile is c as a file to share; false for content that is not one
// (text, audio) or a link that cannot be read (it stays a placeholder).
func (t *remoteTool) toolFile(ctx context.Context, s agent.FileSharer, c mcp.Content, images *int) (agent.ToolFile, bool) {
	tool := t.spec.Name
	switch x := c.(type) {
	case *mcp.ImageContent:
		if len(x.Data) == 0 {
			return agent.ToolFile{}, false
		}
		*images++
		name := fmt.Sprintf("%s-%d", t.remote, *images)
		return agent.ToolFile{Tool: tool, Name: fileName(name, x.MIMEType), MimeType: x.MIMEType, Data: x.Data, Size: int64(len(x.Data))}, true
	case *mcp.EmbeddedResource:
		r := x.Resource
		if r == nil || r.Text == "" && len(r.Blob) == 0 {
			return agent.ToolFile{}, false
		}
		return resourceFile(tool, "", r), true
	case *mcp.ResourceLink:
		if x.URI == "" {
			return agent.ToolFile{}, false
		}
		// A link the server declares too large is not read at all.
		if x.Size != nil && *x.Size > s.MaxFileBytes() {
			return agent.ToolFile{Tool: tool, Name: fileName(cmp.Or(x.Name, uriBase(x.URI)), x.MIMEType), MimeType: x.MIMEType, Size: *x.Size}, true
		}
		rr, err := t.mt.readResource(ctx, x.URI)
		if err != nil || len(rr.Contents) == 0 || rr.Contents[0] == nil {
			return agent.ToolFile{}, false
		}
		r := rr.Contents[0]
		if r.MIMEType == "" {
			r.MIMEType = x.MIMEType
		}
		return resourceFile(tool, x.Name, r), true
	}
	return agent.ToolFile{}, false
}

// resourceFile is a resource's contents as a file, named name (or after
// its URI) with an extension that matches its type.
func resourceFile(tool, name string, r *mcp.ResourceContents) agent.ToolFile {
	data := r.Blob
	if len(data) == 0 {
		data = []byte(r.Text)
	}
	return agent.ToolFile{Tool: tool, Name: fileName(cmp.Or(name, uriBase(r.URI)), r.MIMEType), MimeType: r.MIMEType, Data: data, Size: int64(len(data))}
}

// fileName is name with an extension for mimeType when it has none:
// Slack types an uploaded file by its name.
func fileName(name, mimeType string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, strings.TrimSpace(name))
	if name == "" {
		name = "file"
	}
	if path.Ext(name) != "" || mimeType == "" {
		return name
	}
	mt, _, _ := mime.ParseMediaType(mimeType)
	if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
		return name + preferredExt(mt, exts)
	}
	return name
}

// preferredExt picks the usual extension of a type (the table lists
// ".jpe" before ".jpg", ".asc" before ".txt").
func preferredExt(mimeType string, exts []string) string {
	switch mimeType {
	case "image/jpeg":
		return ".jpg"
	case "text/plain":
		return ".txt"
	case "text/csv":
		return ".csv"
	}
	return exts[0]
}

// uriBase is the last path element of a resource URI.
func uriBase(uri string) string {
	uri, _, _ = strings.Cut(uri, "?")
	uri = strings.TrimRight(uri, "/")
	return uri[strings.LastIndexByte(uri, '/')+1:]
}

// readResource reads uri from the server (resources/read), as the
// requester on a per-user OAuth server.
func (mt *mount) readResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	if mt.isOAuth() && mt.authMode() == AuthUser && mt.parent == nil {
		r, ok := access.CallerFrom(ctx)
		if !ok {
			return nil, errNoRequester
		}
		return mt.userMount(r.User).readResource(ctx, uri)
	}
	c, err := mt.liveConn(ctx)
	if err != nil {
		return nil, err
	}
	return c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
}
