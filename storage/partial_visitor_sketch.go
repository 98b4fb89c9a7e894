package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"sort"
)

// A visitorSketch estimates how many distinct visitor ids it was given: a
// HyperLogLog of 2^sketchP one-byte registers (docs/query-api.md, visitors).
// Its standard error is 1.04/sqrt(2^14) = 0.81%, under the 1% that the query
// API promises for the ranges it estimates. Sketches of disjoint days merge
// into the sketch of their union, which is what makes a 30-day figure cost 30
// small reads instead of a scan of every visit.
//
// While few registers are set it keeps only those (sparse): a day of a
// small site costs a few hundred bytes, not 16 KB. Estimates use Ertl's
// improved estimator ("New cardinality estimation algorithms for
// HyperLogLog sketches", 2017), which needs neither the empirical bias
// tables of HyperLogLog++ nor a switch to linear counting: it is unbiased
// from one visitor up.
type visitorSketch struct {
	sparse map[uint16]uint8 // register -> rank, while at most sparseMax are set
	dense  []uint8          // every register, once more than sparseMax are set
}

const (
	sketchP = 14
	sketchM = 1 << sketchP
	// sketchQ is how many hash bits are left after the register index;
	// a register holds at most sketchQ+1.
	sketchQ = 64 - sketchP
	// sparseMax is where the sparse form (3 bytes a register when encoded)
	// stops being smaller than the dense one.
	sparseMax = sketchM / 3
)

// sketch encodings: a format byte, then the registers.
const (
	sketchSparse byte = 1 // (index uint16 big-endian, rank byte)... in index order
	sketchDense  byte = 2 // sketchM ranks
)

func newVisitorSketch() *visitorSketch {
	return &visitorSketch{sparse: map[uint16]uint8{}}
}

// hashVisitor is FNV-1a followed by the SplitMix64 finaliser: FNV alone
// leaves the high bits, which pick the register, poorly mixed for short
// ids that differ in their last characters.
func hashVisitor(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Add counts the visitor id.
func (s *visitorSketch) Add(id string) {
	h := hashVisitor(id)
	idx := uint16(h >> sketchQ)
	// The guard bit caps the rank at sketchQ+1 when the remaining bits are
	// all zero.
	rank := uint8(bits.LeadingZeros64(h<<sketchP|1<<(sketchP-1)) + 1)
	s.set(idx, rank)
}

func (s *visitorSketch) set(idx uint16, rank uint8) {
	if s.dense != nil {
		if rank > s.dense[idx] {
			s.dense[idx] = rank
		}
		return
	}
	if rank > s.sparse[idx] {
		s.sparse[idx] = rank
		if len(s.sparse) > sparseMax {
			s.dense = make([]uint8, sketchM)
			for i, r := range s.sparse {
				s.dense[i] = r
			}
			s.sparse = nil
		}
	}
}

// Merge adds every visitor of o: the result estimates the union.
func (s *visitorSketch) Merge(o *visitorSketch) {
	if o.dense != nil {
		for i, r := range o.dense {
			if r > 0 {
				s.set(uint16(i), r)
			}
		}
		return
	}
	for i, r := range o.sparse {
		s.set(i, r)
	}
}

// Estimate is the number of distinct visitors, rounded.
func (s *visitorSketch) Estimate() int64 {
	var n [sketchQ + 2]int // registers holding each rank (integers count faster)
	if s.dense != nil {
		for _, r := range s.dense {
			n[r]++
		}
	} else {
		n[0] = sketchM - len(s.sparse)
		for _, r := range s.sparse {
			n[r]++
		}
	}
	return estimateRanks(n)
}

// estimateRanks is Ertl's estimate from how many registers hold each rank.
func estimateRanks(n [sketchQ + 2]int) int64 {
	var c [sketchQ + 2]float64
	for i, x := range n {
		c[i] = float64(x)
	}
	if c[0] == sketchM {
		return 0
	}
	const m = float64(sketchM)
	z := m * ertlTau(1-c[sketchQ+1]/m)
	for k := sketchQ; k >= 1; k-- {
		z = 0.5 * (z + c[k])
	}
	z += m * ertlSigma(c[0]/m)
	return int64(math.Round(m * m / (2 * math.Ln2) / z))
}

func ertlSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			return z
		}
	}
}

func ertlTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if z == prev {
			return z / 3
		}
	}
}

// MarshalBinary encodes the sketch in its smaller form.
func (s *visitorSketch) MarshalBinary() ([]byte, error) {
	if s.dense != nil {
		return append([]byte{sketchDense}, s.dense...), nil
	}
	idx := make([]int, 0, len(s.sparse))
	for i := range s.sparse {
		idx = append(idx, int(i))
	}
	sort.Ints(idx)
	b := make([]byte, 1, 1+3*len(idx))
	b[0] = sketchSparse
	for _, i := range idx {
		b = binary.BigEndian.AppendUint16(b, uint16(i))
		b = append(b, s.sparse[uint16(i)])
	}
	return b, nil
}

var errBadSketch = errors.New("storage: malformed visitor sketch")

// UnmarshalBinary decodes what MarshalBinary wrote.
func (s *visitorSketch) UnmarshalBinary(b []byte) error {
	*s = visitorSketch{sparse: map[uint16]uint8{}}
	return walkSketch(b, func(regs []byte) {
		s.dense, s.sparse = append([]uint8(nil), regs...), nil
	}, s.set)
}

// walkSketch checks an encoded sketch and hands its registers to dense
// (all sketchM of them) or to sparse (each set one), for the one decoder
// the sketch and the union of day partials share. A register past
// sketchQ+1 or an index past sketchM is errBadSketch, which the callers
// answer by reading the tables instead.
func walkSketch(b []byte, dense func(regs []byte), sparse func(idx uint16, r uint8)) error {
	if len(b) == 0 {
		return errBadSketch
	}
	switch b[0] {
	case sketchDense:
		if len(b) != 1+sketchM {
			return errBadSketch
		}
		for _, r := range b[1:] {
			if r > sketchQ+1 {
				return errBadSketch
			}
		}
		dense(b[1:])
	case sketchSparse:
		if (len(b)-1)%3 != 0 {
			return errBadSketch
		}
		for p := 1; p < len(b); p += 3 {
			idx, r := binary.BigEndian.Uint16(b[p:]), b[p+2]
			if idx >= sketchM || r > sketchQ+1 {
				return errBadSketch
			}
			sparse(idx, r)
		}
	default:
		return errBadSketch
	}
	return nil
}
