package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/bobbinbot/bobbin/bot/slackapi"
	"github.com/bobbinbot/bobbin/provider"
)

// Files shared in Slack, as the model gets them: a message's files
// (mentions, thread replies, DMs, imported thread context, the message a
// shortcut was used on) become content parts of its user message. Images
// and PDFs are downloaded once, hashed and sent with the message; the
// transcript keeps only their reference (provider.FileRef), and later turns,
// other replicas and restarted processes fetch the bytes again through
// Turn.Files (download.go). Text-like files are inlined. Anything else, and
// anything that cannot be fetched, becomes a one-line note: a file never
// fails a turn.

// sharedFile is a file as Slack describes it in events, conversations.replies
// and files.info, in Slack's own field names. It is part of the queued
// message (inbound), so its JSON is a stored format: extend, never rename.
type sharedFile struct {
	ID                 string `json:"id"`
	Name               string `json:"name,omitempty"`
	Title              string `json:"title,omitempty"`
	Mimetype           string `json:"mimetype,omitempty"`
	Filetype           string `json:"filetype,omitempty"`
	Size               int64  `json:"size,omitempty"`
	Mode               string `json:"mode,omitempty"`
	FileAccess         string `json:"file_access,omitempty"`
	IsExternal         bool   `json:"is_external,omitempty"`
	ExternalType       string `json:"external_type,omitempty"`
	URLPrivate         string `json:"url_private,omitempty"`
	URLPrivateDownload string `json:"url_private_download,omitempty"`
}

// maxFilesPerMessage bounds the files taken from one message (Slack lets a
// person share up to 10 at once); the rest are ignored.
const maxFilesPerMessage = 20

// decodeFiles reads an event's "files" leniently: a file that does not
// decode is skipped (its id kept when readable, so the model is told),
// never the message.
func decodeFiles(raw json.RawMessage) []sharedFile {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []sharedFile
	for _, it := range items {
		if len(out) == maxFilesPerMessage {
			break
		}
		var f sharedFile
		if json.Unmarshal(it, &f) != nil {
			// A field of an unexpected kind: keep what identifies it.
			var id struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			}
			if json.Unmarshal(it, &id) != nil || id.ID == "" {
				continue
			}
			f = sharedFile{ID: id.ID, Name: id.Name, Mode: "unreadable"}
		}
		if f.ID == "" && f.URLPrivate == "" {
			continue
		}
		f.Size = max(f.Size, 0)
		out = append(out, f)
	}
	return out
}

// fromSlackFile converts slack-go's file object (conversations.replies,
// files.info, shortcut payloads).
func fromSlackFile(f slack.File) sharedFile {
	return sharedFile{
		ID: f.ID, Name: f.Name, Title: f.Title, Mimetype: f.Mimetype, Filetype: f.Filetype, Size: int64(max(f.Size, 0)),
		Mode: f.Mode, FileAccess: f.FileAccess, IsExternal: f.IsExternal, ExternalType: f.ExternalType,
		URLPrivate: f.URLPrivate, URLPrivateDownload: f.URLPrivateDownload,
	}
}

func fromSlackFiles(fs []slack.File) []sharedFile {
	var out []sharedFile
	for _, f := range fs {
		if len(out) == maxFilesPerMessage {
			break
		}
		out = append(out, fromSlackFile(f))
	}
	return out
}

// name is the file's name as people see it.
func (f sharedFile) name() string {
	return cmp0(f.Name, f.Title, f.ID)
}

func cmp0(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// stub reports a Slack Connect stub: the event names the file only, and
// files.info gives the rest.
func (f sharedFile) stub() bool {
	return f.Mode == "file_access" || f.FileAccess == "check_file_info"
}

// downloadURL is where the bytes are: url_private_download, else
// url_private.
func (f sharedFile) downloadURL() string {
	return cmp0(f.URLPrivateDownload, f.URLPrivate)
}

// ref is the file's reference before its bytes are known.
func (f sharedFile) ref() provider.FileRef {
	return provider.FileRef{ID: f.ID, Name: f.name(), MimeType: f.Mimetype, Size: f.Size, URL: f.downloadURL()}
}

// fileKind is how a file can reach the model, judged from what Slack says
// of it (the bytes are checked after the download).
type fileKind int

const (
	kindOther fileKind = iota
	kindImage
	kindPDF
	kindText
)

var (
	imageMimes = []string{provider.MimePNG, provider.MimeJPEG, provider.MimeGIF, provider.MimeWebP}
	// textMimes are the non-text/* types that are text.
	textMimes = []string{"application/json", "application/x-yaml", "application/yaml", "application/xml",
		"application/javascript", "application/x-javascript", "application/typescript", "application/x-sh",
		"application/x-python", "application/toml", "application/sql", "application/x-ndjson", "application/csv",
		"application/x-httpd-php", "application/graphql", "image/svg+xml"}
	// textFiletypes are Slack's filetype names of text and source code.
	textFiletypes = []string{"text", "markdown", "csv", "tsv", "json", "yaml", "xml", "html", "css", "go", "python",
		"javascript", "typescript", "shell", "sql", "java", "kotlin", "swift", "c", "cpp", "csharp", "ruby", "rust",
		"php", "perl", "lua", "r", "scala", "dart", "diff", "dockerfile", "groovy", "haskell", "ini", "toml", "svg",
		"clojure", "coffeescript", "erlang", "elixir", "fsharp", "julia", "latex", "matlab", "objc", "ocaml",
		"pascal", "powershell", "puppet", "smalltalk", "vb", "vbscript", "verilog", "vhdl", "velocity", "xquery"}
	// textExtensions are file name extensions of text files, for files
	// Slack calls "binary".
	textExtensions = []string{"txt", "log", "md", "markdown", "csv", "tsv", "json", "jsonl", "ndjson", "yaml", "yml",
		"toml", "ini", "cfg", "conf", "env", "properties", "xml", "html", "htm", "css", "scss", "go", "mod", "py",
		"js", "mjs", "ts", "tsx", "jsx", "sh", "bash", "zsh", "rb", "rs", "java", "kt", "c", "h", "cc", "cpp", "hpp",
		"cs", "php", "swift", "sql", "diff", "patch", "tf", "hcl", "proto", "graphql", "lua", "pl", "r", "scala",
		"dart", "vue", "svelte", "gradle", "make", "mk", "dockerfile", "svg", "tex", "rst", "adoc", "srt", "vtt"}
)

// kind classifies f from its declared type, Slack filetype, mode and name.
func (f sharedFile) kind() fileKind {
	mt := strings.ToLower(strings.TrimSpace(f.Mimetype))
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	ft := strings.ToLower(f.Filetype)
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(f.name()), "."))
	switch {
	case slices.Contains(imageMimes, mt), slices.Contains([]string{"png", "jpg", "jpeg", "gif", "webp"}, ft):
		return kindImage
	case mt == provider.MimePDF, ft == "pdf":
		return kindPDF
	case f.Mode == "snippet", strings.HasPrefix(mt, "text/"), slices.Contains(textMimes, mt),
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"), slices.Contains(textFiletypes, ft):
		return kindText
	case (mt == "" || mt == "application/octet-stream" || ft == "binary") && slices.Contains(textExtensions, ext):
		return kindText
	}
	return kindOther
}

// Notes for files the model cannot see (provider.Part.AsText puts the
// file's name, type and size in front).
const (
	noteOtherType     = "a file type the model cannot read; only its name, type and size are known"
	noteExternal      = "stored outside Slack, so it was not read"
	noteForeignHost   = "not on Slack's file host, so it was not downloaded"
	noteSignIn        = "Slack did not let the bot download it"
	noteDownload      = "could not be downloaded from Slack"
	noteTimeout       = "could not be downloaded in time"
	noteImageTooLarge = "larger than the 5 MB limit for images"
	notePDFTooLarge   = "larger than the 10 MB limit for PDFs"
	noteTooManyImages = "more than 8 images in one message; only the first 8 are shown"
	noteNotImage      = "not a readable PNG, JPEG, GIF or WebP image"
	noteNotPDF        = "not a readable PDF"
	noteNotText       = "not readable as text"
	noteConnect       = "a Slack Connect file the bot may not open"
	noteHidden        = "hidden by Slack"
	noteUnreadable    = "Slack described it in a form the bot could not read"
	noteContextShare  = "left out: the earlier thread messages fill their share of the context window"
	noteContextMedia  = "an earlier file of the thread; not loaded (only the newest are)"
)

// textReadCap bounds the bytes read of a text file: what is inlined is cut
// at provider.MaxTextFileBytes anyway, and Slack snippets are at most 1 MB.
const textReadCap = 1 << 20

// fileWork bounds the file downloads of one turn before the model is
// called; files not in by then are notes.
const fileWork = 20 * time.Second

// fileTask is one file to turn into a part.
type fileTask struct {
	f sharedFile
	// note, when set, is the part's note without any download.
	note string
}

// fileParts turns the files of a batch of messages into parts, message by
// message (groups[i] are message i's files), downloading in parallel within
// fileWork. At most provider.MaxImagesPerMessage images of one message are
// taken; with images off (LLM_IMAGES=false) images and PDFs are attached as
// references without being downloaded (the agent gives the model a note).
func (b *Bot) fileParts(ctx context.Context, team string, groups [][]fileTask) [][]provider.Part {
	out := make([][]provider.Part, len(groups))
	if len(groups) == 0 {
		return out
	}
	wctx, cancel := context.WithTimeout(ctx, fileWork)
	defer cancel()
	media := b.imagesEnabled()
	var wg sync.WaitGroup
	for i, g := range groups {
		out[i] = make([]provider.Part, len(g))
		images := 0
		for j, t := range g {
			k := t.f.kind()
			if k == kindImage && t.note == "" && !t.f.stub() {
				if images++; images > provider.MaxImagesPerMessage {
					t.note = noteTooManyImages
				}
			}
			if t.note != "" {
				out[i][j] = provider.NotePart(t.f.ref(), t.note)
				continue
			}
			if !media && !t.f.stub() && (k == kindImage || k == kindPDF) {
				out[i][j] = mediaRef(t.f, k)
				continue
			}
			wg.Go(func() { out[i][j] = b.filePart(wctx, team, t.f, media) })
		}
	}
	wg.Wait()
	return out
}

// mediaRef is an image or PDF part by reference only (images off).
func mediaRef(f sharedFile, k fileKind) provider.Part {
	t := provider.PartImage
	if k == kindPDF {
		t = provider.PartDocument
	}
	r := f.ref()
	return provider.Part{Type: t, File: &r}
}

// imagesEnabled asks the agent whether images reach the model
// (agent.Agent.ImagesEnabled; true for runners that do not say).
func (b *Bot) imagesEnabled() bool {
	if ie, ok := b.opts.Agent.(interface{ ImagesEnabled() bool }); ok {
		return ie.ImagesEnabled()
	}
	return true
}

// filePart fetches and checks one file.
func (b *Bot) filePart(ctx context.Context, team string, f sharedFile, media bool) provider.Part {
	if f.stub() {
		full, err := b.fileInfo(ctx, team, f.ID)
		if err != nil {
			b.log.Info("bot: files.info failed for a Slack Connect file; the model gets a note", "team", team, "file_id", f.ID, "err", err)
			return provider.NotePart(f.ref(), noteConnect)
		}
		f = full
		if f.stub() { // still only a stub: nothing more to learn
			return provider.NotePart(f.ref(), noteConnect)
		}
		if k := f.kind(); !media && (k == kindImage || k == kindPDF) {
			return mediaRef(f, k)
		}
	}
	ref := f.ref()
	k := f.kind()
	switch {
	case f.Mode == "unreadable":
		return provider.NotePart(ref, noteUnreadable)
	case f.Mode == "tombstone", f.Mode == "hidden_by_limit":
		return provider.NotePart(ref, noteHidden)
	case f.IsExternal || f.Mode == "external":
		if f.ExternalType != "" {
			return provider.NotePart(ref, "stored outside Slack ("+f.ExternalType+"), so it was not read")
		}
		return provider.NotePart(ref, noteExternal)
	case k == kindOther:
		return provider.NotePart(ref, noteOtherType)
	case k == kindImage && f.Size > provider.MaxImageFileBytes:
		return provider.NotePart(ref, noteImageTooLarge)
	case k == kindPDF && f.Size > provider.MaxDocumentBytes:
		return provider.NotePart(ref, notePDFTooLarge)
	}
	limit, truncate := int64(provider.MaxImageFileBytes), false
	switch k {
	case kindPDF:
		limit = provider.MaxDocumentBytes
	case kindText:
		limit, truncate = textReadCap, true
	}
	data, cut, err := b.files.fetch(ctx, b.botToken(ctx, team), ref.URL, limit, truncate, k == kindText && strings.Contains(strings.ToLower(f.Mimetype), "html"))
	if err != nil {
		if ctx.Err() == nil {
			b.log.Info("bot: a shared file was not downloaded; the model gets a note", "team", team, "file_id", f.ID, "err", err)
		}
		return provider.NotePart(ref, downloadNote(ctx, k, err))
	}
	head := data[:min(len(data), 8<<10)]
	switch k {
	case kindImage:
		mt, w, h, err := provider.SniffImage(data)
		if err != nil || provider.SniffPart(head) != provider.PartImage {
			return provider.NotePart(ref, noteNotImage)
		}
		ref.MimeType, ref.Width, ref.Height = mt, w, h
		return provider.Part{Type: provider.PartImage, File: withHash(ref, data), Data: data}
	case kindPDF:
		if provider.SniffPart(head) != provider.PartDocument {
			return provider.NotePart(ref, noteNotPDF)
		}
		ref.MimeType, ref.Pages = provider.MimePDF, provider.PDFPages(data)
		return provider.Part{Type: provider.PartDocument, File: withHash(ref, data), Data: data}
	}
	if provider.SniffPart(head) != provider.PartTextFile {
		return provider.NotePart(ref, noteNotText)
	}
	if !cut {
		ref.Size = int64(len(data))
		return provider.TextFilePart(ref, data)
	}
	// Cut while reading: the marker must count the bytes never read too.
	return cutTextPart(ref, data)
}

// cutTextPart inlines the first bytes of a text file that was too long to
// read whole, with the marker provider.TextFilePart writes, counting from
// the file's full size.
func cutTextPart(ref provider.FileRef, head []byte) provider.Part {
	p := provider.TextFilePart(ref, head)
	const marker = "\n…[file cut here: "
	if i := strings.LastIndex(p.Text, marker); i >= 0 {
		p.Text = p.Text[:i]
	}
	shown := int64(min(len(head), provider.MaxTextFileBytes))
	rest := max(ref.Size, int64(len(head))+1) - shown
	p.Text += marker + strconv.FormatInt(rest, 10) + " more bytes not shown]"
	return p
}

func withHash(ref provider.FileRef, data []byte) *provider.FileRef {
	sum := sha256.Sum256(data)
	ref.SHA256 = hex.EncodeToString(sum[:])
	ref.Size = int64(len(data))
	return &ref
}

// downloadNote words a download failure for the model.
func downloadNote(ctx context.Context, k fileKind, err error) string {
	switch {
	case errors.Is(err, errForeignHost), errors.Is(err, errForeignRedirect):
		return noteForeignHost
	case errors.Is(err, errSignIn):
		return noteSignIn
	case errors.Is(err, errFileTooLarge) && k == kindPDF:
		return notePDFTooLarge
	case errors.Is(err, errFileTooLarge):
		return noteImageTooLarge
	case ctx.Err() != nil:
		return noteTimeout
	}
	return noteDownload
}

// fileInfo is files.info: the whole file object of a Slack Connect stub.
func (b *Bot) fileInfo(ctx context.Context, team, id string) (sharedFile, error) {
	if id == "" {
		return sharedFile{}, errors.New("no file id")
	}
	var f *slack.File
	err := b.slack.Do(ctx, slackapi.Call{Team: team, Method: slackapi.FilesInfo}, func(ctx context.Context, api *slack.Client) error {
		var err error
		f, _, _, err = api.GetFileInfoContext(ctx, id, 0, 0)
		return err
	})
	if err != nil {
		return sharedFile{}, err
	}
	return fromSlackFile(*f), nil
}
