package posenc

import (
	"encoding/binary"
	"math"
)

// Rows are the rows of an ENCODE_TABLE or ENCODE_SPEC reply: N rows of Width values of Dtype, row
// after row. Data is the reply's bytes as received (little-endian), not copied.
type Rows struct {
	Dtype Dtype
	N     int
	Width int
	Data  []byte
}

// Float32s decodes float32, float16 and bfloat16 rows into N*Width float32 values; every 16-bit value
// is widened exactly (it is a float32). Float64 rows are refused (narrowing them would round): use
// Float64s.
func (r *Rows) Float32s() ([]float32, error) {
	if r.Dtype == Float64 {
		return nil, argError("dtype", "float64 rows do not fit float32 values without rounding; use Float64s")
	}
	out := make([]float32, r.N*r.Width)
	for i := range out {
		out[i] = r.float32At(i)
	}
	return out, nil
}

// Float64s decodes rows of any dtype into N*Width float64 values, each widened exactly.
func (r *Rows) Float64s() []float64 {
	out := make([]float64, r.N*r.Width)
	for i := range out {
		if r.Dtype == Float64 {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.Data[8*i:]))
		} else {
			out[i] = float64(r.float32At(i))
		}
	}
	return out
}

// float32At is value i of a float32, float16 or bfloat16 reply.
func (r *Rows) float32At(i int) float32 {
	switch r.Dtype {
	case Float16:
		return Float16ToFloat32(binary.LittleEndian.Uint16(r.Data[2*i:]))
	case BFloat16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(r.Data[2*i:])) << 16)
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(r.Data[4*i:]))
}

// Float16ToFloat32 widens an IEEE-754 binary16 value (its bits) to the float32 of the same value:
// subnormals, ±0, ±inf and NaN (its payload kept) included.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exponent := uint32(h>>10) & 0x1f
	mantissa := uint32(h) & 0x3ff
	switch {
	case exponent == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mantissa<<13)
	case exponent == 0 && mantissa == 0:
		return math.Float32frombits(sign)
	case exponent == 0: // subnormal: m * 2^-24, normalised
		e := uint32(127 - 14)
		for mantissa&0x400 == 0 {
			mantissa <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mantissa&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exponent+127-15)<<23 | mantissa<<13)
}
