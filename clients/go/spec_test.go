package posenc

import (
	"errors"
	"testing"
)

// docs/protocol.md's examples: Vaswani interleaved dim 128, and RoPE with n frequencies.
func TestSpecLayouts(t *testing.T) {
	freqs := make([]float64, 64)
	v := InterleavedSpec(freqs, 1, 128)
	if v.NFreq != 64 || v.RowWidth != 128 || v.NCos != 64 || v.Flags != SpecInterleaved || v.Validate() != nil {
		t.Fatalf("%+v", v)
	}
	odd := InterleavedSpec(make([]float64, 4), 1, 7)
	if odd.NCos != 3 || odd.Validate() != nil {
		t.Fatalf("odd width: %+v", odd)
	}
	r := CosSinSpec(make([]float64, 3), 1.2)
	if r.RowWidth != 6 || r.SinBase != 3 || r.CosBase != 0 || r.NCos != 3 || r.Validate() != nil {
		t.Fatalf("%+v", r)
	}
}

func TestSpecRefusals(t *testing.T) {
	ok := func() *InlineSpec { return InterleavedSpec([]float64{1, 0.5}, 1, 4) }
	cases := map[string]func(s *InlineSpec){
		"spec.n_freq":    func(s *InlineSpec) { s.NFreq, s.Freqs, s.NCos, s.RowWidth = 0, nil, 0, 0 },
		"spec.freqs":     func(s *InlineSpec) { s.Freqs = s.Freqs[:1] },
		"spec.n_cos":     func(s *InlineSpec) { s.NCos, s.RowWidth = 3, 5 },
		"spec.flags":     func(s *InlineSpec) { s.Flags |= 8 },
		"spec.row_width": func(s *InlineSpec) { s.RowWidth = 5 },
		"spec.scale":     func(s *InlineSpec) { s.Scale = []float64{1, 2, 3, 4} },
	}
	for field, spoil := range cases {
		s := ok()
		spoil(s)
		var arg *ArgumentError
		if err := s.Validate(); !errors.As(err, &arg) || arg.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	s := ok()
	s.Flags |= SpecColumnScale
	if err := s.Validate(); err == nil {
		t.Error("column_scale without a scale")
	}
	s.Scale = []float64{1, 2, 3}
	if err := s.Validate(); err == nil {
		t.Error("a scale of the wrong length")
	}
	s.Scale = append(s.Scale, 4)
	if err := s.Validate(); err != nil || s.auxLen() != 32+16+32 {
		t.Errorf("a scaled spec: %v, aux %d", err, s.auxLen())
	}
	zero := &InlineSpec{NFreq: 3, RowWidth: 7, CosBase: 3, NCos: 3, Flags: SpecZeroLast, Freqs: make([]float64, 3)}
	if err := zero.Validate(); err != nil {
		t.Errorf("t2t dim 7 (docs/protocol.md): %v", err)
	}
}
