package posenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// The request frame of docs/protocol.md, field by field: ENCODE_TABLE of table 7, bfloat16, two int64
// positions, request id 0x0102030405060708.
func TestRequestFrameLayout(t *testing.T) {
	r := &request{opcode: OpEncodeTable, dtype: BFloat16, tableID: 7, positions: Int64s{-1, 4096}}
	frame := r.appendFrame(nil, 0x0102030405060708)
	want := []byte{
		48, 0, 0, 0, // length 32 + 0 + 16
		1, 5, 2, 0, // version, opcode, dtype, position_kind
		8, 7, 6, 5, 4, 3, 2, 1, // request_id
		7, 0, 0, 0, // table_id
		2, 0, 0, 0, // count
		0, 0, 0, 0, // aux_len
		0, 0, 0, 0, // reserved
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // -1
		0, 0x10, 0, 0, 0, 0, 0, 0, // 4096
	}
	if !bytes.Equal(frame, want) {
		t.Fatalf("frame\n%v\nwant\n%v", frame, want)
	}
}

func TestSpecFrameCarriesTheInlineBlock(t *testing.T) {
	spec := CosSinSpec([]float64{1, 0.5}, 1.25)
	r := &request{opcode: OpEncodeSpec, dtype: Float64, spec: spec, positions: Float64s{0.5}}
	frame := r.appendFrame(nil, 1)
	le := binary.LittleEndian
	if len(frame) != 32+32+16+8 || le.Uint32(frame) != uint32(len(frame)) || frame[7] != byte(Float64Positions) {
		t.Fatalf("frame of %d bytes, header %v", len(frame), frame[:32])
	}
	aux := frame[32:80]
	fields := []uint32{le.Uint32(aux), le.Uint32(aux[4:]), le.Uint32(aux[8:]), le.Uint32(aux[12:]),
		le.Uint32(aux[16:]), le.Uint32(aux[20:])}
	if want := []uint32{2, 4, 2, 0, 2, 0}; !equalU32(fields, want) || le.Uint32(frame[24:]) != 48 {
		t.Fatalf("prefix %v, want %v (n_freq, row_width, sin_base, cos_base, n_cos, flags)", fields, want)
	}
	if math.Float64frombits(le.Uint64(aux[24:])) != 1.25 || math.Float64frombits(le.Uint64(aux[40:])) != 0.5 ||
		math.Float64frombits(le.Uint64(frame[80:])) != 0.5 {
		t.Fatal("amplitude, frequencies or position misplaced")
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTooManyPositionsAreRefusedBeforeSending(t *testing.T) {
	r := &request{opcode: OpEncodeTable, positions: Range{Start: 0, Count: 1 << 32}}
	var arg *ArgumentError
	if err := r.check(); !errors.As(err, &arg) || arg.Field != "positions" {
		t.Fatalf("got %v", err)
	}
	r.positions = Range{Start: math.MaxInt64 - 1, Count: 3}
	if err := r.check(); !errors.As(err, &arg) || arg.Field != "positions" {
		t.Fatalf("a range past int64: got %v", err)
	}
	r.positions = Range{Start: -2, Count: 3}
	if err := r.check(); err != nil || !bytes.Equal(Range{-2, 3}.appendTo(nil), Int64s{-2, -1, 0}.appendTo(nil)) {
		t.Fatalf("a range is its positions: %v", err)
	}
}

func reply(status Status, dtype Dtype, rows, width, auxLen, length uint32) []byte {
	h := make([]byte, HeaderSize)
	binary.LittleEndian.PutUint32(h, length)
	h[4], h[5], h[6], h[7] = 1, byte(OpEncodeTable), byte(status), byte(dtype)
	binary.LittleEndian.PutUint64(h[8:], 42)
	binary.LittleEndian.PutUint32(h[16:], rows)
	binary.LittleEndian.PutUint32(h[20:], width)
	binary.LittleEndian.PutUint32(h[24:], auxLen)
	return h
}

func TestReplyHeaderChecks(t *testing.T) {
	if h, err := parseReplyHeader(reply(StatusOK, Float16, 3, 5, 0, 32+30)); err != nil || h.requestID != 42 {
		t.Fatalf("a consistent reply: %v", err)
	}
	for name, b := range map[string][]byte{
		"length past the rows": reply(StatusOK, Float16, 3, 5, 0, 32+31),
		"unknown dtype":        reply(StatusOK, 9, 1, 1, 0, 33),
		"aux past the frame":   reply(StatusBadArgument, 0, 0, 0, 10, 40),
		"length under 32":      reply(StatusOK, Float32, 0, 0, 0, 31),
	} {
		if _, err := parseReplyHeader(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad := reply(StatusOK, Float32, 0, 0, 0, 32)
	bad[4] = 2
	if _, err := parseReplyHeader(bad); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("version 2: %v", err)
	}
}

// The status table of docs/protocol.md: names, and which ones close the connection.
func TestStatuses(t *testing.T) {
	closes := map[Status]bool{StatusBadFrame: true, StatusBadVersion: true, StatusUnknownOpcode: true,
		StatusFrameTooLarge: true, StatusTooManyConnections: true, StatusShuttingDown: true, StatusIdleTimeout: true,
		Status(15): true}
	for s := StatusOK; s <= 15; s++ {
		if s.Closes() != closes[s] {
			t.Errorf("%v closes: %v", s, s.Closes())
		}
	}
	if StatusPositionOutOfRange.String() != "POSITION_OUT_OF_RANGE" || Status(15).String() != "STATUS_15" {
		t.Error("status names")
	}
}

func TestDtypes(t *testing.T) {
	for _, name := range []string{"float32", "float16", "bfloat16", "float64"} {
		d, err := ParseDtype(name)
		if err != nil || d.String() != name {
			t.Errorf("%s: %v %v", name, d, err)
		}
	}
	var arg *ArgumentError
	if _, err := ParseDtype("float8"); !errors.As(err, &arg) || arg.Field != "dtype" {
		t.Errorf("float8: %v", err)
	}
	if Float16.Size() != 2 || Float64.Size() != 8 || Dtype(4).Size() != 0 {
		t.Error("sizes")
	}
}

func TestServerErrorText(t *testing.T) {
	h := replyHeader{status: StatusPositionOutOfRange, requestID: 9, opcode: OpEncodeTable}
	e := newServerError(h, "positions: element 3 is 5000, outside the table's positions [0, 4096)")
	if e.Field != "positions" || e.Message != "element 3 is 5000, outside the table's positions [0, 4096)" ||
		e.RequestID != 9 || e.Closes() {
		t.Fatalf("%+v", e)
	}
	if e := newServerError(h, "no colon here"); e.Field != "request" || e.Message != "no colon here" {
		t.Fatalf("%+v", e)
	}
}

func TestAddresses(t *testing.T) {
	for address, want := range map[string][2]string{
		"127.0.0.1:8001":     {"tcp", "127.0.0.1:8001"},
		"tcp://host:1":       {"tcp", "host:1"},
		"[::1]:8001":         {"tcp", "[::1]:8001"},
		"unix:/run/p.sock":   {"unix", "/run/p.sock"},
		"unix:///run/p.sock": {"unix", "/run/p.sock"},
		"./p.sock":           {"unix", "./p.sock"},
	} {
		network, addr, err := ParseAddress(address)
		if err != nil || network != want[0] || addr != want[1] {
			t.Errorf("%s: %s %s %v", address, network, addr, err)
		}
	}
	for _, bad := range []string{"", "host", ":8001", "host:0", "host:65536", "host:x", "unix:"} {
		var arg *ArgumentError
		if _, _, err := ParseAddress(bad); !errors.As(err, &arg) || arg.Field != "address" {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
