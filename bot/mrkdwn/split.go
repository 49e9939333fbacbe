package mrkdwn

import (
	"strings"
	"unicode/utf8"
)

// Split cuts a Markdown answer into pieces whose escaped size (as Markdown
// returns it) is at most limit bytes, preferring paragraph and code-fence
// boundaries, then line ends, then spaces, and never cutting a UTF-8 rune. A
// code block that must be split is closed at the end of one piece and
// reopened, with its info string, at the start of the next. limit <= 0 means
// SplitLimit. The pieces are returned in order, without empty ones.
//
// The split is done on the source, before escaping, so no piece can end
// inside an entity or a <…> sequence of the rendered text.
func Split(md string, limit int) []string {
	if limit <= 0 {
		limit = SplitLimit
	}
	limit = max(limit, 64) // room for a fence pair and a few characters
	if escapedLen(md) <= limit {
		if s := strings.TrimRight(md, "\n"); strings.TrimSpace(s) != "" {
			return []string{s}
		}
		return nil
	}
	p := packer{limit: limit}
	for _, b := range mdBlocks(md) {
		p.add(b)
	}
	p.flush()
	return p.out
}

// mdBlock is a run of source lines kept together when possible: a paragraph
// (up to and including its trailing blank lines) or a whole fenced block.
type mdBlock struct {
	lines []string // each with its "\n" except perhaps the last
	// opener and closer are set for a fenced block: the first and last lines
	// (closer may be "" when the fence is never closed).
	opener, closer string
}

func mdBlocks(md string) []mdBlock {
	var out []mdBlock
	var cur mdBlock
	fence := ""
	flush := func() {
		if len(cur.lines) > 0 || cur.opener != "" {
			out = append(out, cur)
		}
		cur = mdBlock{}
	}
	for line := range strings.Lines(md) {
		bare := strings.TrimRight(line, "\r\n")
		switch {
		case fence != "":
			if isFenceCloser(bare, fence) {
				cur.closer = line
				fence = ""
				flush()
				continue
			}
			cur.lines = append(cur.lines, line)
		default:
			if f, ok := fenceOpener(bare); ok {
				flush()
				fence = f
				cur.opener = line
				continue
			}
			cur.lines = append(cur.lines, line)
			if strings.TrimSpace(bare) == "" {
				flush()
			}
		}
	}
	flush()
	return out
}

// text is the block's source.
func (b mdBlock) text() string {
	return b.opener + strings.Join(b.lines, "") + b.closer
}

type packer struct {
	limit int
	cur   strings.Builder
	used  int
	out   []string
}

func (p *packer) flush() {
	s := strings.TrimRight(p.cur.String(), "\n")
	if strings.TrimSpace(s) != "" {
		p.out = append(p.out, s)
	}
	p.cur.Reset()
	p.used = 0
}

func (p *packer) write(s string) {
	p.cur.WriteString(s)
	p.used += escapedLen(s)
}

func (p *packer) room() int { return p.limit - p.used }

func (p *packer) add(b mdBlock) {
	whole := b.text()
	if n := escapedLen(whole); n <= p.room() {
		p.write(whole)
		return
	} else if n <= p.limit && p.used > 0 {
		p.flush()
		p.write(whole)
		return
	}
	// Too big for any piece: cut it, starting in the current piece unless
	// little room is left there.
	if p.room() < p.limit/4 {
		p.flush()
	}
	if i := tableStart(b.lines); b.opener == "" && i >= 0 {
		p.addTable(b.lines, i)
		return
	}
	if b.opener == "" || escapedLen(b.opener) > p.limit/4 {
		// An absurd info string would leave no room for the code: cut the
		// block as plain lines rather than lose the text.
		p.addLines(append(append([]string{b.opener}, b.lines...), b.closer))
		return
	}
	p.addFenced(b)
}

// addLines packs lines, cutting over-long lines at spaces or runes.
func (p *packer) addLines(lines []string) {
	for _, line := range lines {
		for line != "" {
			if escapedLen(line) <= p.room() {
				p.write(line)
				break
			}
			if p.used > 0 && escapedLen(line) <= p.limit {
				p.flush()
				continue
			}
			head, rest := cutLine(line, p.room(), true)
			if head == "" {
				p.flush()
				continue
			}
			p.write(head)
			p.flush()
			line = rest
		}
	}
}

// addFenced packs a fenced code block, closing and reopening the fence at
// every cut.
func (p *packer) addFenced(b mdBlock) {
	opener := b.opener
	if !strings.HasSuffix(opener, "\n") {
		opener += "\n"
	}
	f, _ := fenceOpener(strings.TrimRight(opener, "\r\n"))
	closer := f + "\n"
	reserve := escapedLen(closer) + 1
	if escapedLen(opener)+reserve+16 > p.room() {
		p.flush()
	}
	p.write(opener)
	open := true
	for _, line := range b.lines {
		for line != "" {
			if !open {
				p.write(opener)
				open = true
			}
			if escapedLen(line)+reserve <= p.room() {
				p.write(line)
				break
			}
			head, rest := "", line
			if p.room()-reserve > 16 || escapedLen(line)+reserve+escapedLen(opener) > p.limit {
				head, rest = cutLine(line, p.room()-reserve, false)
			}
			if head != "" {
				if !strings.HasSuffix(head, "\n") {
					head += "\n"
				}
				p.write(head)
			}
			if !strings.HasSuffix(p.cur.String(), "\n") {
				p.write("\n")
			}
			p.write(closer)
			p.flush()
			open = false
			line = rest
		}
	}
	if !open {
		return
	}
	if b.closer != "" {
		p.write(b.closer)
	} else {
		// The model never closed its fence; close it so the pieces render.
		if !strings.HasSuffix(p.cur.String(), "\n") {
			p.write("\n")
		}
		p.write(closer)
	}
}

// tableStart is the index of the header row of a GFM table among lines
// (a row with a pipe followed by a delimiter row), or -1.
func tableStart(lines []string) int {
	for i := 0; i+1 < len(lines); i++ {
		if strings.Contains(lines[i], "|") && isDelimiterRow(lines[i+1]) {
			return i
		}
	}
	return -1
}

// isDelimiterRow reports whether line is a table's delimiter row
// ("|---|:--:|", "--- | ---").
func isDelimiterRow(line string) bool {
	cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	if !strings.Contains(line, "-") || (len(cells) < 2 && !strings.Contains(line, "|")) {
		return false
	}
	for _, c := range cells {
		c = strings.Trim(strings.TrimSpace(c), ":")
		if c == "" || strings.Trim(c, "-") != "" {
			return false
		}
	}
	return true
}

// addTable packs a paragraph holding a table whose header row is
// lines[at]: a table cut between pieces repeats its header and delimiter
// rows at the start of the next piece, so every piece renders as a table
// (Slack's markdown block renders pipe tables).
func (p *packer) addTable(lines []string, at int) {
	head := lines[at] + lines[at+1]
	if !strings.HasSuffix(head, "\n") || escapedLen(head) > p.limit/4 {
		p.addLines(lines)
		return
	}
	p.addLines(lines[:at])
	if p.room() < escapedLen(head)*2 {
		p.flush()
	}
	p.write(head)
	for _, row := range lines[at+2:] {
		if n := escapedLen(row); n > p.room() && strings.TrimSpace(row) != "" {
			p.flush()
			if escapedLen(head)+n <= p.limit {
				p.write(head)
			} // else a row too long to go with the header: cut as lines
		}
		p.addLines([]string{row})
	}
}

// cutLine returns the longest head of line whose escaped size is at most n,
// cut after a space when words is set and one exists in the second half,
// else at a rune boundary; rest is the remainder.
func cutLine(line string, n int, words bool) (head, rest string) {
	if n <= 0 {
		return "", line
	}
	size, i := 0, 0
	for i < len(line) {
		_, w := utf8.DecodeRuneInString(line[i:])
		c := escapedLen(line[i : i+w])
		if size+c > n {
			break
		}
		size += c
		i += w
	}
	if i >= len(line) {
		return line, ""
	}
	if words {
		if j := strings.LastIndexByte(line[:i], ' '); j > i/2 {
			i = j + 1
		}
	}
	return line[:i], line[i:]
}
