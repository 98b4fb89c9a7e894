package storage

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// The estimate stays within three standard errors (3 × 0.81%) of the true
// count at every size, small ones included, and the encoded sketch reads
// back to the same estimate.
func TestVisitorSketchAccuracy(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 2, 10, 100, 1_000, 5_000, 9_999, 20_000, 100_000, 1_000_000} {
		s := newVisitorSketch()
		for i := range n {
			s.Add(fmt.Sprintf("visitor-%d", i))
			s.Add(fmt.Sprintf("visitor-%d", i)) // a repeat changes nothing
		}
		got := s.Estimate()
		if diff := math.Abs(float64(got-int64(n))) / math.Max(1, float64(n)); diff > 3*0.0081 {
			t.Errorf("n=%d: got estimate %d, off by %.2f%%, want within 2.43%%", n, got, 100*diff)
		}
		b, _ := s.MarshalBinary()
		var back visitorSketch
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if back.Estimate() != got {
			t.Errorf("n=%d: got %d after a round trip, want %d", n, back.Estimate(), got)
		}
		if n <= 100 && len(b) > 1+3*n {
			t.Errorf("n=%d: got %d bytes encoded, want the sparse form", n, len(b))
		}
	}
}

// Merging the sketches of overlapping sets estimates their union, as a
// range's days merge into the range.
func TestVisitorSketchMergeIsUnion(t *testing.T) {
	t.Parallel()
	days := make([]*visitorSketch, 30)
	for d := range days {
		days[d] = newVisitorSketch()
		for i := d * 1_000; i < d*1_000+5_000; i++ { // each day overlaps the next four
			days[d].Add(fmt.Sprintf("v%d", i))
		}
	}
	all := newVisitorSketch()
	for _, d := range days {
		all.Merge(d)
	}
	want := 29*1_000 + 5_000
	if got := all.Estimate(); math.Abs(float64(got-int64(want)))/float64(want) > 3*0.0081 {
		t.Errorf("got %d, want about %d", got, want)
	}
}

func TestVisitorSketchRejectsMalformedEncodings(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, {9}, {sketchSparse, 0}, {sketchSparse, 0xff, 0xff, 1}, {sketchSparse, 0, 1, 99}, {sketchDense, 1, 2}} {
		var s visitorSketch
		if err := s.UnmarshalBinary(b); err == nil {
			t.Errorf("%x: got no error, want one", b)
		}
	}
}

// TestDamagedSketchRefused: a sketch whose bytes were damaged is
// errBadSketch for the sketch and for the union of day partials alike,
// dense or sparse, never a panic (the query then reads the tables).
func TestDamagedSketchRefused(t *testing.T) {
	t.Parallel()
	dense := make([]byte, 1+sketchM)
	dense[0] = sketchDense
	dense[100] = 255 // a rank no register can have
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown form", []byte{0x7f}},
		{"dense, short", dense[:100]},
		{"dense, register out of range", dense},
		{"sparse, cut", []byte{sketchSparse, 0, 1}},
		{"sparse, index out of range", []byte{sketchSparse, 0xff, 0xff, 1}},
		{"sparse, register out of range", []byte{sketchSparse, 0, 1, 200}},
	} {
		var s visitorSketch
		if err := s.UnmarshalBinary(c.b); !errors.Is(err, errBadSketch) {
			t.Errorf("%s: sketch: got %v, want errBadSketch", c.name, err)
		}
		var u sketchUnion
		if err := u.add(c.b, 1); !errors.Is(err, errBadSketch) {
			t.Errorf("%s: union: got %v, want errBadSketch", c.name, err)
		}
	}
}
