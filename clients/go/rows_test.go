package posenc

import (
	"encoding/binary"
	"math"
	"testing"
)

// Every float16 bit pattern widens to its value: (-1)^s 2^(e-15) (1 + m/1024), subnormals
// 2^-14 (m/1024), inf and NaN.
func TestFloat16WidensExactly(t *testing.T) {
	for bits := 0; bits < 1<<16; bits++ {
		sign, exponent, mantissa := bits>>15, (bits>>10)&0x1f, bits&0x3ff
		var want float64
		switch {
		case exponent == 0x1f && mantissa == 0:
			want = math.Inf(1)
		case exponent == 0x1f:
			want = math.NaN()
		case exponent == 0:
			want = math.Ldexp(float64(mantissa), -24)
		default:
			want = math.Ldexp(float64(1024+mantissa), exponent-25)
		}
		if sign == 1 {
			want = -want
		}
		got := float64(Float16ToFloat32(uint16(bits)))
		if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && (got != want || math.Signbit(got) != (sign == 1))) {
			t.Fatalf("%#04x: %v, want %v", bits, got, want)
		}
	}
	if bits := math.Float32bits(Float16ToFloat32(0xfe01)); bits != 0xffc02000 {
		t.Fatalf("a NaN's payload: %#08x", bits)
	}
}

func TestRowsDecode(t *testing.T) {
	data := make([]byte, 0, 8)
	data = binary.LittleEndian.AppendUint16(data, 0x3c00) // 1.0 in float16
	data = binary.LittleEndian.AppendUint16(data, 0xc000) // -2.0
	half := &Rows{Dtype: Float16, N: 1, Width: 2, Data: data}
	values, err := half.Float32s()
	if err != nil || values[0] != 1 || values[1] != -2 {
		t.Fatalf("%v %v", values, err)
	}
	brain := &Rows{Dtype: BFloat16, N: 2, Width: 1, Data: []byte{0x80, 0x3f, 0x49, 0x40}} // 1.0, 3.140625
	values, _ = brain.Float32s()
	if values[0] != 1 || values[1] != 3.140625 || brain.Float64s()[1] != 3.140625 {
		t.Fatalf("bfloat16: %v", values)
	}
	wide := &Rows{Dtype: Float64, N: 1, Width: 1, Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.1))}
	if _, err := wide.Float32s(); err == nil || wide.Float64s()[0] != 0.1 {
		t.Fatal("float64 rows: Float32s must refuse them, Float64s return them")
	}
}
