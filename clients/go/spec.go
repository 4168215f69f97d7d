package posenc

import (
	"encoding/binary"
	"math"
)

// InlineSpec is the aux block of ENCODE_SPEC (docs/protocol.md, "Inline specs"): frequencies, an
// amplitude and where each sin and cos column goes. For position p and frequency i the server writes
// Amplitude*sin(p*Freqs[i]) at column 2i (SpecInterleaved) or SinBase+i, and, for i < NCos,
// Amplitude*cos(p*Freqs[i]) at 2i+1 or CosBase+i; SpecZeroLast adds a zero last column;
// SpecColumnScale multiplies column j by Scale[j].
//
// For rows bit-identical to posenc's tables, send the library's frequencies
// (posenc.SinusoidalSpec(d).freqs, posenc.rope_inv_freq(spec)): Go's math.Pow is not the C library's
// pow and gives other last bits for about half of them. A named computed encoding (a table published
// with computed=true, read with Encode) needs no frequencies at all.
type InlineSpec struct {
	NFreq, RowWidth, SinBase, CosBase, NCos, Flags uint32
	Amplitude                                      float64
	Freqs                                          []float64
	Scale                                          []float64 // nil: no scale block (SpecColumnScale unset)
}

// InterleavedSpec is the Vaswani layout of width rowWidth: sin(p w_i) at column 2i, cos at 2i+1 (an
// odd width ends with a lone sin). len(freqs) must be ceil(rowWidth/2).
func InterleavedSpec(freqs []float64, amplitude float64, rowWidth uint32) *InlineSpec {
	return &InlineSpec{NFreq: uint32(len(freqs)), RowWidth: rowWidth, NCos: rowWidth / 2, Flags: SpecInterleaved,
		Amplitude: amplitude, Freqs: freqs}
}

// CosSinSpec is RoPE's [cos(p w_0..w_{n-1}) | sin(p w_0..w_{n-1})] of width 2n, amplitude the
// attention factor (1 for most scalings).
func CosSinSpec(freqs []float64, amplitude float64) *InlineSpec {
	n := uint32(len(freqs))
	return &InlineSpec{NFreq: n, RowWidth: 2 * n, SinBase: n, NCos: n, Amplitude: amplitude, Freqs: freqs}
}

// Validate refuses a spec that cannot form a valid block, naming the field: NFreq 0 (spec.n_freq),
// Freqs not NFreq long (spec.freqs), NCos > NFreq (spec.n_cos), unknown flag bits (spec.flags), a
// RowWidth other than NFreq + NCos (+1 with SpecZeroLast) (spec.row_width), or a Scale that is not
// RowWidth long, or given without SpecColumnScale, or missing with it (spec.scale). Values (finite,
// within the server's limits) and column placement are the server's to check.
func (s *InlineSpec) Validate() error {
	zeroLast := uint64(0)
	if s.Flags&SpecZeroLast != 0 {
		zeroLast = 1
	}
	switch {
	case s.NFreq == 0:
		return argError("spec.n_freq", "must be >= 1, got 0")
	case uint64(len(s.Freqs)) != uint64(s.NFreq):
		return argError("spec.freqs", "must hold n_freq %d frequencies, got %d", s.NFreq, len(s.Freqs))
	case s.NCos > s.NFreq:
		return argError("spec.n_cos", "must be <= n_freq, got %d", s.NCos)
	case s.Flags&^specFlagsAll != 0:
		return argError("spec.flags", "has unknown bits (known: 1 interleaved, 2 zero_last, 4 column_scale), got %d",
			s.Flags)
	case uint64(s.RowWidth) != uint64(s.NFreq)+uint64(s.NCos)+zeroLast:
		return argError("spec.row_width", "must equal n_freq + n_cos (+1 with zero_last), got %d", s.RowWidth)
	case (s.Flags&SpecColumnScale != 0) != (s.Scale != nil):
		return argError("spec.scale", "is given exactly when flags has column_scale (4)")
	case s.Scale != nil && uint64(len(s.Scale)) != uint64(s.RowWidth):
		return argError("spec.scale", "must hold row_width %d values, got %d", s.RowWidth, len(s.Scale))
	}
	return nil
}

func (s *InlineSpec) auxLen() int {
	return SpecPrefixSize + 8*len(s.Freqs) + 8*len(s.Scale)
}

func (s *InlineSpec) appendAux(b []byte) []byte {
	for _, v := range [...]uint32{s.NFreq, s.RowWidth, s.SinBase, s.CosBase, s.NCos, s.Flags} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.Amplitude))
	b = Float64s(s.Freqs).appendTo(b)
	return Float64s(s.Scale).appendTo(b)
}
