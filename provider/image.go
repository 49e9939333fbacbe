package provider

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"unicode/utf8"

	"golang.org/x/image/draw"
	"golang.org/x/image/webp"
)

// Media types of the files the providers take as bytes.
const (
	MimePNG  = "image/png"
	MimeJPEG = "image/jpeg"
	MimeGIF  = "image/gif"
	MimeWebP = "image/webp"
	MimePDF  = "application/pdf"
)

// Limits on shared files, the same for every provider.
const (
	// MaxImageFileBytes is the largest image file taken at all (larger ones
	// become a note); PrepareImage then brings it within ImageLimits.
	MaxImageFileBytes = 5 << 20
	// MaxDocumentBytes is the largest PDF sent (Anthropic allows 32 MB per
	// request, OpenAI 50 MB; a thread re-sends its PDFs at every step).
	MaxDocumentBytes = 10 << 20
	// MaxImagesPerMessage is how many images one message carries; the rest
	// become notes.
	MaxImagesPerMessage = 8
)

// Defaults of ImageLimits.
const (
	// DefaultImageMaxBytes keeps an image's base64 within Anthropic's 5 MB
	// per image (3.75 MiB of bytes is 5 MiB of base64).
	DefaultImageMaxBytes = 3 << 20 * 5 / 4
	// DefaultImageMaxSide and DefaultImageMaxPixels follow Anthropic's
	// guidance: a longer side than 1568 px or more than ~1.15 megapixels is
	// scaled down by the API anyway, at a cost in latency. OpenAI's high
	// detail reads at most 2048×768, so nothing is lost there either.
	DefaultImageMaxSide   = 1568
	DefaultImageMaxPixels = 1_150_000
	// DefaultImageMaxSourcePixels bounds what is decoded at all: a small
	// file can claim a huge canvas (a decompression bomb).
	DefaultImageMaxSourcePixels = 50_000_000
)

// ImageLimits bound an image as sent to a model. Zero fields mean the
// defaults.
type ImageLimits struct {
	// MaxBytes caps the encoded image (default DefaultImageMaxBytes).
	MaxBytes int
	// MaxSide caps the longer side in pixels (default DefaultImageMaxSide).
	MaxSide int
	// MaxPixels caps width×height (default DefaultImageMaxPixels).
	MaxPixels int
	// MaxSourcePixels refuses larger inputs before decoding them (default
	// DefaultImageMaxSourcePixels).
	MaxSourcePixels int
}

func (l ImageLimits) withDefaults() ImageLimits {
	l.MaxBytes = cmp.Or(l.MaxBytes, DefaultImageMaxBytes)
	l.MaxSide = cmp.Or(l.MaxSide, DefaultImageMaxSide)
	l.MaxPixels = cmp.Or(l.MaxPixels, DefaultImageMaxPixels)
	l.MaxSourcePixels = cmp.Or(l.MaxSourcePixels, DefaultImageMaxSourcePixels)
	return l
}

// Image is an image ready to send.
type Image struct {
	Data     []byte
	MimeType string
	// Width and Height are the dimensions of Data.
	Width, Height int
	// Changed is true when Data is not the input: scaled down, rotated
	// upright from its EXIF orientation, re-encoded, or a GIF's first frame
	// as PNG.
	Changed bool
}

// Errors of SniffImage and PrepareImage. Their texts are fit for a note the
// model reads.
var (
	ErrImageFormat   = errors.New("not a PNG, JPEG, GIF or WebP image")
	ErrImageTooLarge = errors.New("image too large to send")
)

// imageType returns the media type of data from its magic bytes, or "".
func imageType(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return MimePNG
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return MimeJPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return MimeGIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return MimeWebP
	}
	return ""
}

// SniffImage reads an image's real type (from its bytes, not its name or
// declared type) and its dimensions as it will be seen (a JPEG's EXIF
// rotation applied), without decoding the pixels.
func SniffImage(data []byte) (mimeType string, width, height int, err error) {
	mt, w, h, err := sniff(data)
	if err != nil {
		return mt, 0, 0, err
	}
	if mt == MimeJPEG && jpegOrientation(data) >= 5 {
		w, h = h, w
	}
	return mt, w, h, nil
}

func sniff(data []byte) (string, int, int, error) {
	mt := imageType(data)
	var cfg image.Config
	var err error
	r := bytes.NewReader(data)
	switch mt {
	case MimePNG:
		cfg, err = png.DecodeConfig(r)
	case MimeJPEG:
		cfg, err = jpeg.DecodeConfig(r)
	case MimeGIF:
		cfg, err = gif.DecodeConfig(r)
	case MimeWebP:
		cfg, err = webp.DecodeConfig(r)
	default:
		return "", 0, 0, ErrImageFormat
	}
	if err != nil {
		return mt, 0, 0, fmt.Errorf("unreadable %s: %w", mt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return mt, 0, 0, fmt.Errorf("unreadable %s: empty image", mt)
	}
	return mt, cfg.Width, cfg.Height, nil
}

// PrepareImage returns data ready to send within lim: unchanged when it is
// a PNG, JPEG or WebP already within the limits (the common case costs a
// header read); otherwise decoded, turned upright (JPEG EXIF orientation),
// scaled down to fit, and encoded again (JPEG stays JPEG at quality 85;
// others become PNG, or JPEG when a PNG would be over MaxBytes). A GIF
// becomes its first frame as PNG (OpenAI takes only still GIFs). The
// result is deterministic: the same input always gives the same bytes, so a
// re-prepared image keeps a prompt's cached prefix.
//
// Errors wrap ErrImageFormat (not an image of the four types, or corrupt)
// or ErrImageTooLarge (more than MaxSourcePixels, or cannot be brought
// under MaxBytes). PrepareImage decodes at most one image at a time per
// call; callers bound how many run at once.
func PrepareImage(data []byte, lim ImageLimits) (Image, error) {
	lim = lim.withDefaults()
	mt, w, h, err := sniff(data)
	if err != nil {
		if errors.Is(err, ErrImageFormat) {
			return Image{}, err
		}
		return Image{}, fmt.Errorf("%w: %w", ErrImageFormat, err)
	}
	if int64(w)*int64(h) > int64(lim.MaxSourcePixels) {
		return Image{}, fmt.Errorf("%w: %d×%d is over %d megapixels", ErrImageTooLarge, w, h, lim.MaxSourcePixels/1_000_000)
	}
	orient := 1
	if mt == MimeJPEG {
		orient = jpegOrientation(data)
	}
	if len(data) <= lim.MaxBytes && fits(w, h, lim) && mt != MimeGIF && orient == 1 {
		return Image{Data: data, MimeType: mt, Width: w, Height: h}, nil
	}
	src, err := decodeImage(mt, data)
	if err != nil {
		return Image{}, fmt.Errorf("%w: unreadable %s: %w", ErrImageFormat, mt, err)
	}
	scale := math.Min(1, float64(lim.MaxSide)/float64(max(w, h)))
	scale = math.Min(scale, math.Sqrt(float64(lim.MaxPixels)/(float64(w)*float64(h))))
	for range 6 {
		nw, nh := max(1, int(float64(w)*scale)), max(1, int(float64(h)*scale))
		var img image.Image = src
		if nw != w || nh != h {
			img = scaleDown(src, nw, nh)
		}
		img = orientImage(img, orient)
		out, outType, err := encodeImage(img, mt, lim.MaxBytes)
		if err != nil {
			return Image{}, err
		}
		if len(out) <= lim.MaxBytes {
			b := img.Bounds()
			return Image{Data: out, MimeType: outType, Width: b.Dx(), Height: b.Dy(), Changed: true}, nil
		}
		scale *= 0.75
	}
	return Image{}, fmt.Errorf("%w: still over %s after scaling down", ErrImageTooLarge, HumanSize(int64(lim.MaxBytes)))
}

func fits(w, h int, lim ImageLimits) bool {
	return max(w, h) <= lim.MaxSide && int64(w)*int64(h) <= int64(lim.MaxPixels)
}

func decodeImage(mt string, data []byte) (image.Image, error) {
	r := bytes.NewReader(data)
	switch mt {
	case MimePNG:
		return png.Decode(r)
	case MimeJPEG:
		return jpeg.Decode(r)
	case MimeGIF:
		return gif.Decode(r)
	case MimeWebP:
		return webp.Decode(r)
	}
	return nil, ErrImageFormat
}

// jpegQuality is the quality of re-encoded JPEGs: visually lossless for
// photos and screenshots a model reads.
const jpegQuality = 85

// encodeImage encodes img: as JPEG when the source was one, else as PNG,
// falling back to JPEG (on white, JPEG has no alpha) when the PNG is over
// maxBytes.
func encodeImage(img image.Image, srcType string, maxBytes int) ([]byte, string, error) {
	var buf bytes.Buffer
	if srcType != MimeJPEG {
		if err := (&png.Encoder{CompressionLevel: png.DefaultCompression}).Encode(&buf, img); err != nil {
			return nil, "", fmt.Errorf("encoding PNG: %w", err)
		}
		if buf.Len() <= maxBytes {
			return buf.Bytes(), MimePNG, nil
		}
		buf.Reset()
		img = onWhite(img)
	}
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: jpegQuality}); err != nil {
		return nil, "", fmt.Errorf("encoding JPEG: %w", err)
	}
	return buf.Bytes(), MimeJPEG, nil
}

// onWhite composes img over a white background.
func onWhite(img image.Image) image.Image {
	if o, ok := img.(interface{ Opaque() bool }); ok && o.Opaque() {
		return img
	}
	b := img.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(dst, dst.Bounds(), img, b.Min, draw.Over)
	return dst
}

// orientImage turns img upright for EXIF orientation o (2–8; 1 and
// unknown values leave it as it is).
func orientImage(img image.Image, o int) image.Image {
	if o < 2 || o > 8 {
		return img
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	src, ok := img.(*image.RGBA)
	if !ok {
		src = image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(src, src.Bounds(), img, b.Min, draw.Src)
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range dh {
		for x := range dw {
			// (sx, sy) is the stored pixel shown at (x, y).
			var sx, sy int
			switch o {
			case 2: // mirrored
				sx, sy = w-1-x, y
			case 3: // upside down
				sx, sy = w-1-x, h-1-y
			case 4: // mirrored upside down
				sx, sy = x, h-1-y
			case 5: // mirrored, turned
				sx, sy = y, x
			case 6: // stored turned left: turn right
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8: // stored turned right: turn left
				sx, sy = w-1-y, x
			}
			si := src.PixOffset(sx, sy)
			di := dst.PixOffset(x, y)
			copy(dst.Pix[di:di+4], src.Pix[si:si+4])
		}
	}
	return dst
}

// jpegOrientation reads the EXIF orientation (1–8) of a JPEG, 1 when it has
// none or it cannot be read. Providers may not apply it, and re-encoding
// drops it, so PrepareImage turns such images upright itself.
func jpegOrientation(data []byte) int {
	i := 2 // after SOI
	for i+4 <= len(data) {
		if data[i] != 0xff {
			return 1
		}
		marker := data[i+1]
		if marker == 0xd8 || marker >= 0xd0 && marker <= 0xd7 || marker == 0x01 || marker == 0xff {
			i += 1 + boolInt(marker != 0xff)
			continue
		}
		if marker == 0xda || marker == 0xd9 { // start of scan, end of image
			return 1
		}
		n := int(data[i+2])<<8 | int(data[i+3])
		if n < 2 || i+2+n > len(data) {
			return 1
		}
		seg := data[i+4 : i+2+n]
		if marker == 0xe1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			return exifOrientation(seg[6:])
		}
		i += 2 + n
	}
	return 1
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exifOrientation reads tag 0x0112 of IFD0 of a TIFF structure.
func exifOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var u16 func([]byte) int
	var u32 func([]byte) int
	switch string(t[:4]) {
	case "II*\x00":
		u16 = func(b []byte) int { return int(b[0]) | int(b[1])<<8 }
		u32 = func(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24 }
	case "MM\x00*":
		u16 = func(b []byte) int { return int(b[0])<<8 | int(b[1]) }
		u32 = func(b []byte) int { return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3]) }
	default:
		return 1
	}
	off := u32(t[4:8])
	if off < 8 || off+2 > len(t) {
		return 1
	}
	n := u16(t[off:])
	for e := range n {
		p := off + 2 + 12*e
		if p+12 > len(t) {
			return 1
		}
		if u16(t[p:]) == 0x0112 && u16(t[p+2:]) == 3 { // SHORT
			if v := u16(t[p+8:]); v >= 1 && v <= 8 {
				return v
			}
			return 1
		}
	}
	return 1
}

// SniffPart says how a file's bytes can reach a model, from its first
// bytes (the first 8 KB are plenty): PartImage for PNG, JPEG, GIF and WebP,
// PartDocument for PDF, PartTextFile for UTF-8 text without NUL bytes
// (text/*, JSON, YAML, CSV, Markdown, logs, source code, Slack snippets,
// SVG), and PartNote for anything else.
func SniffPart(head []byte) PartType {
	switch {
	case imageType(head) != "":
		return PartImage
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return PartDocument
	}
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	// The head may end inside a rune.
	for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
		head = head[:len(head)-1]
	}
	if utf8.Valid(head) && bytes.IndexByte(head, 0) < 0 {
		return PartTextFile
	}
	return PartNote
}

// PDFPages estimates a PDF's page count by counting its page objects
// ("/Type /Page"); compressed object streams can hide them, and then it
// falls back to the largest "/Count" (the page tree's total). 0 means
// unknown.
func PDFPages(data []byte) int {
	pages := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("/Type"))
		if j < 0 {
			break
		}
		k := i + j + len("/Type")
		for k < len(data) && (data[k] == ' ' || data[k] == '\n' || data[k] == '\r' || data[k] == '\t') {
			k++
		}
		if bytes.HasPrefix(data[k:], []byte("/Page")) {
			e := k + len("/Page")
			if e >= len(data) || !isPDFNameChar(data[e]) {
				pages++
			}
		}
		i = k
	}
	if pages > 0 {
		return pages
	}
	best := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("/Count"))
		if j < 0 {
			break
		}
		k := i + j + len("/Count")
		for k < len(data) && data[k] == ' ' {
			k++
		}
		n := 0
		for k < len(data) && data[k] >= '0' && data[k] <= '9' && n < 1_000_000 {
			n = n*10 + int(data[k]-'0')
			k++
		}
		best = max(best, n)
		i = k
	}
	return best
}

func isPDFNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
