package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PinStore keeps the hash of every tool definition a workspace has
// approved, per server. cmd/bot adapts the session package to it.
type PinStore interface {
	ToolPins(ctx context.Context, team, server string) (map[string]string, error)
	PutToolPins(ctx context.Context, team, server string, pins map[string]string) error
}

// memPins is the PinStore used when Options.Pins is nil (one process only).
type memPins struct {
	mu sync.Mutex
	m  map[[2]string]map[string]string
}

func (p *memPins) ToolPins(_ context.Context, team, server string) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for k, v := range p.m[[2]string{team, server}] {
		out[k] = v
	}
	return out, nil
}

func (p *memPins) PutToolPins(_ context.Context, team, server string, pins map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[2]string]map[string]string{}
	}
	cp := make(map[string]string, len(pins))
	for k, v := range pins {
		cp[k] = v
	}
	p.m[[2]string{team, server}] = cp
	return nil
}

// toolHash is sha256 over the canonical JSON of everything the model or the
// policy sees of a tool. Round-tripping through `any` sorts object keys.
func toolHash(t *mcp.Tool) string {
	canon := func(v any) any {
		if v == nil {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		var out any
		_ = json.Unmarshal(b, &out)
		return out
	}
	b, _ := json.Marshal(map[string]any{
		"name":         t.Name,
		"title":        t.Title,
		"description":  t.Description,
		"inputSchema":  canon(t.InputSchema),
		"outputSchema": canon(t.OutputSchema),
		"annotations":  canon(t.Annotations),
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Scanner flags. They are shown to admins; they do not block a tool.
const (
	FlagInvisibleUnicode = "invisible-unicode"
	FlagTagCharacters    = "tag-characters"
	FlagInstructions     = "instruction-override"
	FlagImportantTag     = "important-tag"
	FlagSecrecy          = "hide-from-user"
	FlagSensitivePath    = "sensitive-path"
	FlagURL              = "url"
	FlagLongDescription  = "long-description"
	FlagBase64           = "base64-blob"
	FlagOtherTool        = "mentions-other-tool"
	FlagSuspiciousParam  = "suspicious-parameter"
)

var (
	scanInstructionsRE = regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\b.{0,30}\b(previous|prior|above|earlier|all|system|your)\b.{0,20}\b(instructions?|prompts?|rules|messages?|guidelines)\b`)
	scanTagRE          = regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|secret|admin|critical)\b[^>]*>`)
	scanSecrecyRE      = regexp.MustCompile(`(?i)\b(do not|don't|never)\s+(tell|inform|mention|show|reveal|notify)\b.{0,20}\b(the\s+)?user\b`)
	scanPathRE         = regexp.MustCompile(`(?i)(~/\.ssh|\bid_rsa\b|\bid_ed25519\b|(^|[\s/"'])\.env\b|/etc/passwd|/etc/shadow|\.aws/credentials|\.netrc|\bmcp\.json\b)`)
	scanURLRE          = regexp.MustCompile(`(?i)\b(https?|ftp|wss?)://`)
	scanBase64RE       = regexp.MustCompile(`[A-Za-z0-9+/]{120,}={0,2}`)
	scanParamRE        = regexp.MustCompile(`(?i)^(instructions?|system_?prompt|prompt|note_to_(ai|assistant|model)|sidenote|assistant_?notes?|context_for_(ai|model))$`)
)

func invisibleRune(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x2064,
		r >= 0x2066 && r <= 0x2069, r == 0xFEFF, r == 0x00AD, r == 0x180E:
		return true
	}
	return false
}

func tagRune(r rune) bool { return r >= 0xE0000 && r <= 0xE007F }

// scanText returns the flags raised by one piece of text.
func scanText(s string, otherTools []string) []string {
	var flags []string
	add := func(f string) {
		if !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	for _, r := range s {
		switch {
		case tagRune(r):
			add(FlagTagCharacters)
		case invisibleRune(r):
			add(FlagInvisibleUnicode)
		}
	}
	// Tag characters mirror ASCII: decode the hidden text and scan it too.
	visible := strings.Map(func(r rune) rune {
		if tagRune(r) || invisibleRune(r) {
			return -1
		}
		return r
	}, s)
	hidden := strings.Map(func(r rune) rune {
		if a := r - 0xE0000; tagRune(r) && a >= 0x20 && a < 0x7F {
			return a
		}
		return -1
	}, s)
	plain := visible + "\n" + hidden
	if scanInstructionsRE.MatchString(plain) {
		add(FlagInstructions)
	}
	if scanTagRE.MatchString(plain) {
		add(FlagImportantTag)
	}
	if scanSecrecyRE.MatchString(plain) {
		add(FlagSecrecy)
	}
	if scanPathRE.MatchString(plain) {
		add(FlagSensitivePath)
	}
	if scanURLRE.MatchString(plain) {
		add(FlagURL)
	}
	if scanBase64RE.MatchString(plain) {
		add(FlagBase64)
	}
	if utf8.RuneCountInString(s) > 1024 {
		add(FlagLongDescription)
	}
	low := strings.ToLower(plain)
	for _, o := range otherTools {
		if len(o) >= 4 && strings.Contains(low, strings.ToLower(o)) {
			add(FlagOtherTool)
			break
		}
	}
	return flags
}

// scanTool scans a tool's description, title and every description and
// property name inside its input schema.
func scanTool(t *mcp.Tool, otherTools []string) []string {
	flags := scanText(t.Title+"\n"+t.Description, otherTools)
	merge := func(fs []string) {
		for _, f := range fs {
			if !slices.Contains(flags, f) {
				flags = append(flags, f)
			}
		}
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 16 {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				switch k {
				case "description", "title":
					if s, ok := sub.(string); ok {
						fs := scanText(s, otherTools)
						// Parameter descriptions may legitimately be long or hold URLs.
						fs = slices.DeleteFunc(fs, func(f string) bool { return f == FlagLongDescription || f == FlagURL })
						merge(fs)
					}
				case "properties":
					if props, ok := sub.(map[string]any); ok {
						for name := range props {
							if scanParamRE.MatchString(name) {
								merge([]string{FlagSuspiciousParam})
							}
							merge(slices.DeleteFunc(scanText(name, nil), func(f string) bool { return f == FlagLongDescription }))
						}
					}
				}
				walk(sub, depth+1)
			}
		case []any:
			for _, sub := range x {
				walk(sub, depth+1)
			}
		}
	}
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err == nil {
			var v any
			if json.Unmarshal(b, &v) == nil {
				walk(v, 0)
			}
		}
	}
	slices.Sort(flags)
	return flags
}
