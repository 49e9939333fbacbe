package provider

import (
	"image"
	"image/color"

	"golang.org/x/image/draw"
)

// scaleDown returns src scaled to w×h (smaller than src). A large factor is
// taken first by averaging k×k blocks (alias-free, one pass over the
// source, memory bounded by the result); the remaining factor, below 2, by
// bilinear interpolation. x/image/draw's kernel scalers would do it in one
// step but buffer w × source-height float64 quadruples: ~120 MB for a
// 12-megapixel photo.
func scaleDown(src image.Image, w, h int) *image.RGBA {
	b := src.Bounds()
	if k := min(b.Dx()/w, b.Dy()/h); k >= 2 {
		src = shrink(src, k)
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	return dst
}

// shrink scales img down by the integer factor k ≥ 2, each result pixel
// the average of a k×k block (premultiplied). Pixels past the last whole
// block are dropped.
func shrink(img image.Image, k int) *image.RGBA {
	b := img.Bounds()
	w, h := b.Dx()/k, b.Dy()/k
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	sums := make([]uint32, 4*w)
	n := uint32(k * k)
	for oy := range h {
		clear(sums)
		for sy := b.Min.Y + oy*k; sy < b.Min.Y+(oy+1)*k; sy++ {
			addRow(img, sums, b.Min.X, sy, w, k)
		}
		row := dst.Pix[oy*dst.Stride : oy*dst.Stride+4*w]
		for i := range row {
			row[i] = uint8((sums[i] + n/2) / n)
		}
	}
	return dst
}

// addRow adds row y of img (w·k pixels from x0) into sums, 8-bit
// premultiplied RGBA per result column.
func addRow(img image.Image, sums []uint32, x0, y, w, k int) {
	switch src := img.(type) {
	case *image.YCbCr:
		for ox := range w {
			s := sums[4*ox : 4*ox+4]
			for x := x0 + ox*k; x < x0+(ox+1)*k; x++ {
				ci := src.COffset(x, y)
				r, g, bl := color.YCbCrToRGB(src.Y[src.YOffset(x, y)], src.Cb[ci], src.Cr[ci])
				s[0] += uint32(r)
				s[1] += uint32(g)
				s[2] += uint32(bl)
				s[3] += 255
			}
		}
	case *image.RGBA:
		for ox := range w {
			s := sums[4*ox : 4*ox+4]
			p := src.Pix[src.PixOffset(x0+ox*k, y):]
			for i := 0; i < 4*k; i += 4 {
				s[0] += uint32(p[i])
				s[1] += uint32(p[i+1])
				s[2] += uint32(p[i+2])
				s[3] += uint32(p[i+3])
			}
		}
	default:
		for ox := range w {
			s := sums[4*ox : 4*ox+4]
			for x := x0 + ox*k; x < x0+(ox+1)*k; x++ {
				r, g, bl, a := img.At(x, y).RGBA()
				s[0] += r >> 8
				s[1] += g >> 8
				s[2] += bl >> 8
				s[3] += a >> 8
			}
		}
	}
}
