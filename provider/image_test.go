package provider

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"testing"
)

// gradient is a w×h opaque test image; noisy adds per-pixel noise so it
// compresses badly.
func gradient(w, h int, noisy bool) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			c := color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), 128, 255}
			if noisy {
				c.B = uint8(r.IntN(256))
			}
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeGIF(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withOrientation inserts an EXIF APP1 segment with the given orientation
// right after a JPEG's SOI marker (big-endian TIFF, one IFD0 entry).
func withOrientation(jpg []byte, o int) []byte {
	tiff := []byte{'M', 'M', 0, '*', 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, byte(o), 0, 0, 0, 0, 0, 0}
	seg := append([]byte("Exif\x00\x00"), tiff...)
	app1 := append([]byte{0xff, 0xe1, byte((len(seg) + 2) >> 8), byte(len(seg) + 2)}, seg...)
	out := append([]byte{}, jpg[:2]...)
	out = append(out, app1...)
	return append(out, jpg[2:]...)
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSniffImage(t *testing.T) {
	img := gradient(40, 30, false)
	tests := []struct {
		name string
		data []byte
		mime string
		w, h int
	}{
		{"png", encodePNG(t, img), MimePNG, 40, 30},
		{"jpeg", encodeJPEG(t, img), MimeJPEG, 40, 30},
		{"jpeg turned by EXIF", withOrientation(encodeJPEG(t, img), 6), MimeJPEG, 30, 40},
		{"gif", encodeGIF(t, img), MimeGIF, 40, 30},
		{"webp lossless", readTestdata(t, "grad-lossless.webp"), MimeWebP, 40, 30},
		{"webp lossy", readTestdata(t, "grad-lossy.webp"), MimeWebP, 40, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mime, w, h, err := SniffImage(tc.data)
			if err != nil || mime != tc.mime || w != tc.w || h != tc.h {
				t.Errorf("SniffImage = %q %d×%d %v, want %q %d×%d", mime, w, h, err, tc.mime, tc.w, tc.h)
			}
			if SniffPart(tc.data) != PartImage {
				t.Errorf("SniffPart = %q", SniffPart(tc.data))
			}
		})
	}
	for _, bad := range [][]byte{nil, []byte("BM6\x00\x00\x00"), []byte("%PDF-1.7"), []byte("\x89PNG\r\n\x1a\nbroken")} {
		if _, _, _, err := SniffImage(bad); err == nil {
			t.Errorf("SniffImage(%q) succeeded", bad)
		}
		if _, err := PrepareImage(bad, ImageLimits{}); !errors.Is(err, ErrImageFormat) {
			t.Errorf("PrepareImage(%q) err = %v, want ErrImageFormat", bad, err)
		}
	}
}

func TestPrepareImage(t *testing.T) {
	small := encodePNG(t, gradient(40, 30, false))
	// Sources are kept small (limits scaled down with them) so the test
	// stays fast under -race; the code path is the same as at 1.15 MP.
	big := encodePNG(t, gradient(400, 300, false))
	bigJPEG := encodeJPEG(t, gradient(400, 300, false))
	webp := readTestdata(t, "grad-lossy.webp")
	px := ImageLimits{MaxPixels: 30_000}
	tests := []struct {
		name    string
		data    []byte
		lim     ImageLimits
		mime    string
		w, h    int
		changed bool
		err     error
	}{
		{name: "within limits: as is", data: small, mime: MimePNG, w: 40, h: 30},
		{name: "within default limits: as is", data: big, mime: MimePNG, w: 400, h: 300},
		{name: "webp within limits: as is", data: webp, mime: MimeWebP, w: 40, h: 30},
		{name: "png scaled to the pixel cap", data: big, lim: px, mime: MimePNG, w: 200, h: 150, changed: true},
		{name: "jpeg stays jpeg", data: bigJPEG, lim: px, mime: MimeJPEG, w: 200, h: 150, changed: true},
		{name: "long side cap", data: big, lim: ImageLimits{MaxSide: 100}, mime: MimePNG, w: 100, h: 75, changed: true},
		{name: "webp scaled becomes png", data: webp, lim: ImageLimits{MaxSide: 20}, mime: MimePNG, w: 20, h: 15, changed: true},
		{name: "gif becomes png", data: encodeGIF(t, gradient(40, 30, false)), mime: MimePNG, w: 40, h: 30, changed: true},
		{name: "exif rotation applied", data: withOrientation(encodeJPEG(t, gradient(40, 20, false)), 6), mime: MimeJPEG, w: 20, h: 40, changed: true},
		{name: "too many source pixels", data: big, lim: ImageLimits{MaxSourcePixels: 100_000}, err: ErrImageTooLarge},
		{name: "cannot get small enough", data: encodePNG(t, gradient(100, 100, true)), lim: ImageLimits{MaxBytes: 100}, err: ErrImageTooLarge},
		{name: "png over bytes becomes jpeg", data: encodePNG(t, gradient(150, 150, true)), lim: ImageLimits{MaxBytes: 30 << 10}, mime: MimeJPEG, w: 150, h: 150, changed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := PrepareImage(tc.data, tc.lim)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if img.MimeType != tc.mime || img.Width != tc.w || img.Height != tc.h || img.Changed != tc.changed {
				t.Errorf("got %s %d×%d changed=%v, want %s %d×%d changed=%v", img.MimeType, img.Width, img.Height, img.Changed, tc.mime, tc.w, tc.h, tc.changed)
			}
			if !tc.changed && !bytes.Equal(img.Data, tc.data) {
				t.Error("an image within the limits was re-encoded")
			}
			mime, w, h, err := SniffImage(img.Data)
			if err != nil || mime != img.MimeType || w != img.Width || h != img.Height {
				t.Errorf("output sniffs as %s %d×%d %v", mime, w, h, err)
			}
			lim := tc.lim.withDefaults()
			if len(img.Data) > lim.MaxBytes || max(w, h) > lim.MaxSide || w*h > lim.MaxPixels {
				t.Errorf("output %d bytes %d×%d is over the limits %+v", len(img.Data), w, h, lim)
			}
			again, _ := PrepareImage(tc.data, tc.lim)
			if !bytes.Equal(again.Data, img.Data) {
				t.Error("PrepareImage is not deterministic: a re-prepared image would break the prompt cache")
			}
		})
	}
}

// TestOrientations: every EXIF orientation shows the stored top-left
// pixel where the orientation says it belongs.
func TestDefaultLimits(t *testing.T) {
	want := ImageLimits{MaxBytes: 3932160, MaxSide: 1568, MaxPixels: 1_150_000, MaxSourcePixels: 50_000_000}
	if got := (ImageLimits{}).withDefaults(); got != want {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
}

func TestOrientations(t *testing.T) {
	// A 4×2 image whose stored top-left pixel is red, the rest black.
	src := image.NewRGBA(image.Rect(0, 0, 4, 2))
	for i := 3; i < len(src.Pix); i += 4 {
		src.Pix[i] = 255
	}
	src.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255})
	// Where the red pixel lands, per orientation.
	want := map[int]image.Point{1: {0, 0}, 2: {3, 0}, 3: {3, 1}, 4: {0, 1}, 5: {0, 0}, 6: {1, 0}, 7: {1, 3}, 8: {0, 3}}
	for o, p := range want {
		out := orientImage(src, o).(interface {
			image.Image
			RGBAAt(x, y int) color.RGBA
		})
		if c := out.RGBAAt(p.X, p.Y); c.R != 255 {
			t.Errorf("orientation %d: red not at %v (bounds %v)", o, p, out.Bounds())
		}
	}
}

func TestJPEGOrientationRobust(t *testing.T) {
	jpg := encodeJPEG(t, gradient(8, 8, false))
	for o := 1; o <= 8; o++ {
		if got := jpegOrientation(withOrientation(jpg, o)); got != o {
			t.Errorf("orientation %d read as %d", o, got)
		}
	}
	for _, b := range [][]byte{jpg, jpg[:3], withOrientation(jpg, 9), withOrientation(jpg, 6)[:30]} {
		if got := jpegOrientation(b); got != 1 {
			t.Errorf("jpegOrientation(%d bytes) = %d, want 1", len(b), got)
		}
	}
}

// FuzzPrepareImage: arbitrary bytes never panic; a success is within the
// limits and is what it says it is.
func FuzzPrepareImage(f *testing.F) {
	f.Add(encodePNG(f, gradient(30, 20, false)))
	f.Add(encodeJPEG(f, gradient(30, 20, false)))
	f.Add(withOrientation(encodeJPEG(f, gradient(30, 20, false)), 8))
	f.Add(encodeGIF(f, gradient(30, 20, false)))
	f.Add(readTestdata(f, "grad-lossless.webp"))
	f.Add(readTestdata(f, "grad-lossy.webp"))
	lim := ImageLimits{MaxSide: 16, MaxPixels: 200, MaxSourcePixels: 1 << 16, MaxBytes: 64 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := PrepareImage(data, lim)
		if err != nil {
			return
		}
		mime, w, h, err := SniffImage(img.Data)
		if err != nil || mime != img.MimeType || w != img.Width || h != img.Height {
			t.Fatalf("output sniffs as %s %d×%d %v; PrepareImage said %s %d×%d", mime, w, h, err, img.MimeType, img.Width, img.Height)
		}
		if len(img.Data) > lim.MaxBytes || max(w, h) > lim.MaxSide || w*h > lim.MaxPixels {
			t.Fatalf("output %d bytes %d×%d over the limits", len(img.Data), w, h)
		}
	})
}

// opaqueImage hides an image's concrete type, forcing shrink's generic
// path.
type opaqueImage struct{ image.Image }

// TestShrink: the fast paths (YCbCr from JPEG, RGBA) agree with the
// generic one, and a block average is exact on a known image.
func TestShrink(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 4, 2))
	copy(src.Pix, []byte{
		0, 0, 0, 255, 100, 100, 100, 255, 10, 20, 30, 255, 10, 20, 30, 255,
		200, 200, 200, 255, 100, 100, 100, 255, 30, 40, 50, 255, 30, 40, 50, 255,
	})
	got := shrink(src, 2)
	if want := []byte{100, 100, 100, 255, 20, 30, 40, 255}; !bytes.Equal(got.Pix, want) {
		t.Errorf("shrink = %v, want %v", got.Pix, want)
	}
	ycc, err := jpeg.Decode(bytes.NewReader(encodeJPEG(t, gradient(64, 48, true))))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ycc.(*image.YCbCr); !ok {
		t.Fatalf("decoded %T", ycc)
	}
	for _, k := range []int{2, 3, 5} {
		fast, slow := shrink(ycc, k), shrink(opaqueImage{ycc}, k)
		for i := range fast.Pix {
			if d := int(fast.Pix[i]) - int(slow.Pix[i]); d < -2 || d > 2 {
				t.Fatalf("k=%d: byte %d: fast %d, generic %d", k, i, fast.Pix[i], slow.Pix[i])
			}
		}
	}
}
