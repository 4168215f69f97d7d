package posenc

import (
	"encoding/binary"
	"math"
)

// Positions are the positions of an ENCODE_TABLE or ENCODE_SPEC request: Int64s, Float64s or a Range.
// Integers travel as int64; Float64s carry fractional positions (and NaN or ±inf, which the server
// refuses naming the element).
type Positions interface {
	count() uint64
	kind() PositionKind
	check() error
	appendTo(b []byte) []byte
}

// Int64s are integer positions (a table's rows, transaction ids, timestamps).
type Int64s []int64

// Float64s are float64 positions: fractional ones for a computed encoding or an inline spec; a
// stored table takes those with an integer value.
type Float64s []float64

// Range is the int64 positions Start, Start+1, ..., Start+Count-1, written into the frame as it is
// sent (no slice of them is made).
type Range struct {
	Start int64
	Count uint64
}

func (p Int64s) count() uint64        { return uint64(len(p)) }
func (p Int64s) kind() PositionKind   { return Int64Positions }
func (p Int64s) check() error         { return nil }
func (p Float64s) count() uint64      { return uint64(len(p)) }
func (p Float64s) kind() PositionKind { return Float64Positions }
func (p Float64s) check() error       { return nil }
func (p Range) count() uint64         { return p.Count }
func (p Range) kind() PositionKind    { return Int64Positions }

func (p Int64s) appendTo(b []byte) []byte {
	for _, v := range p {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func (p Float64s) appendTo(b []byte) []byte {
	for _, v := range p {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// check refuses a range whose last position is not an int64 (the u32 limit on the count is the
// request's check).
func (p Range) check() error {
	if p.Count > 0 && p.Start > math.MaxInt64-int64(min64(p.Count-1, math.MaxInt64)) {
		return argError("positions", "the range %d + %d positions passes the largest int64", p.Start, p.Count)
	}
	return nil
}

func (p Range) appendTo(b []byte) []byte {
	for i := uint64(0); i < p.Count; i++ {
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Start+int64(i)))
	}
	return b
}

func min64(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}
