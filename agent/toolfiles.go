package agent

import "context"

// ToolFile is a file a tool returned (an MCP embedded resource, image, or
// a resource the tool linked to and the server let the bot read), to be
// shared with the person rather than shown to the model as bytes.
type ToolFile struct {
	Tool     string // the tool that returned it
	Name     string // the file name the server gave (or derived from its URI)
	MimeType string // the type the server gave ("" when it gave none)
	Data     []byte // nil when the file was too large to fetch
	Size     int64  // len(Data), or the size the server declared
}

// FileSharer puts a tool's file where the person sees it (the bot uploads
// it into the thread). ShareFile returns the line the model gets instead
// of the bytes: that the file was shared (name, type, size), or why it was
// not. It is called from tool calls running in parallel and must honour
// ctx.
type FileSharer interface {
	ShareFile(ctx context.Context, f ToolFile) string
	// MaxFileBytes is the largest file shared: tools need not fetch a
	// larger one (ShareFile then returns why it was not shared).
	MaxFileBytes() int64
}

type fileSharerKey struct{}

// WithFileSharer returns ctx carrying s: tools called with it share the
// files they return through s (the bot sets it on each tool call's
// context, as it sets who asked).
func WithFileSharer(ctx context.Context, s FileSharer) context.Context {
	return context.WithValue(ctx, fileSharerKey{}, s)
}

// FileSharerFrom returns the sharer set by WithFileSharer, or nil: tools
// then describe their files to the model as placeholders.
func FileSharerFrom(ctx context.Context) FileSharer {
	s, _ := ctx.Value(fileSharerKey{}).(FileSharer)
	return s
}

// ToolTable is a tool result that is a JSON array of flat objects, or a
// Markdown (GitHub pipe) table in a result's text, as rows: Columns in
// the order the first objects (or the header row) gave them, one cell per
// column (the value as text, "" when absent).
type ToolTable struct {
	Tool    string
	Columns []string
	Rows    [][]string
	// Align is each column's alignment as a Markdown table's delimiter row
	// says ("left", "center", "right"; "" when it says none); nil for JSON.
	Align []string
	// Markdown: the table is one written in the result's text (the model
	// gets that text as it is); N is its number (1, 2, …) when the text
	// holds several, 0 otherwise.
	Markdown bool
	N        int
}

// TableSharer is a FileSharer that also shows tabular results to the
// person (a table in the thread, or a CSV file when it is too large for
// one). ShareTable returns the line the model gets besides the result.
type TableSharer interface {
	ShareTable(ctx context.Context, t ToolTable) string
}
