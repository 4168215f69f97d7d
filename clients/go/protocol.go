package posenc

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The wire constants of docs/protocol.md (native/include/posenc_proto.h is their C form).
const (
	ProtocolVersion = 1
	HeaderSize      = 32   // request and reply headers
	DefaultPort     = 8001 // [server] binary_port
	SpecPrefixSize  = 32   // the fixed part of an ENCODE_SPEC aux block
)

// Opcode is a request's operation.
type Opcode uint8

// The operations of protocol version 1.
const (
	OpPing        Opcode = 1
	OpStats       Opcode = 2
	OpListTables  Opcode = 3
	OpResolve     Opcode = 4
	OpEncodeTable Opcode = 5
	OpEncodeSpec  Opcode = 6
)

var opcodeNames = [...]string{"", "PING", "STATS", "LIST_TABLES", "RESOLVE", "ENCODE_TABLE", "ENCODE_SPEC"}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && o != 0 {
		return opcodeNames[o]
	}
	return fmt.Sprintf("opcode %d", uint8(o))
}

// Dtype is the type of the values in reply rows.
type Dtype uint8

// The wire dtypes. BFloat16 is the top 16 bits of a float32.
const (
	Float32  Dtype = 0
	Float16  Dtype = 1
	BFloat16 Dtype = 2
	Float64  Dtype = 3
)

var dtypeNames = [...]string{"float32", "float16", "bfloat16", "float64"}

func (d Dtype) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype %d", uint8(d))
}

// Size is the bytes of one value (0 for a code that is no dtype).
func (d Dtype) Size() int {
	switch d {
	case Float32:
		return 4
	case Float16, BFloat16:
		return 2
	case Float64:
		return 8
	}
	return 0
}

// ParseDtype maps "float32", "float16", "bfloat16" or "float64" to its Dtype; any other name is an
// *ArgumentError naming the field "dtype".
func ParseDtype(name string) (Dtype, error) {
	for code, known := range dtypeNames {
		if name == known {
			return Dtype(code), nil
		}
	}
	return 0, argError("dtype", "unsupported dtype %q; choose one of bfloat16, float16, float32, float64", name)
}

// Status is a reply's status: 0 OK, else an error code (docs/protocol.md, "Errors").
type Status uint8

// The status codes of protocol version 1.
const (
	StatusOK                 Status = 0
	StatusBadFrame           Status = 1
	StatusBadVersion         Status = 2
	StatusUnknownOpcode      Status = 3
	StatusFrameTooLarge      Status = 4
	StatusTooManyPositions   Status = 5
	StatusUnknownTable       Status = 6
	StatusPositionOutOfRange Status = 7
	StatusBadArgument        Status = 8
	StatusOutputTooLarge     Status = 9
	StatusTooManyConnections Status = 10
	StatusShuttingDown       Status = 11
	StatusTableUnavailable   Status = 12
	StatusInternal           Status = 13
	StatusIdleTimeout        Status = 14
)

var statusNames = [...]string{"OK", "BAD_FRAME", "BAD_VERSION", "UNKNOWN_OPCODE", "FRAME_TOO_LARGE",
	"TOO_MANY_POSITIONS", "UNKNOWN_TABLE", "POSITION_OUT_OF_RANGE", "BAD_ARGUMENT", "OUTPUT_TOO_LARGE",
	"TOO_MANY_CONNECTIONS", "SHUTTING_DOWN", "TABLE_UNAVAILABLE", "INTERNAL", "IDLE_TIMEOUT"}

// String is the status's name as the protocol document spells it (e.g. "POSITION_OUT_OF_RANGE").
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("STATUS_%d", uint8(s))
}

// Closes says whether the server ends the connection after an error of this status. A status this
// client does not know closes, as the document asks.
func (s Status) Closes() bool {
	switch s {
	case StatusTooManyPositions, StatusUnknownTable, StatusPositionOutOfRange, StatusBadArgument,
		StatusOutputTooLarge, StatusTableUnavailable, StatusInternal:
		return false
	}
	return s != StatusOK
}

// PositionKind says how the positions of a request travel.
type PositionKind uint8

// Positions are int64 or float64 values.
const (
	Int64Positions   PositionKind = 0
	Float64Positions PositionKind = 1
)

// Inline-spec flags (docs/protocol.md, "Inline specs").
const (
	SpecInterleaved = 1 // sin at column 2i, cos at 2i+1
	SpecZeroLast    = 2 // the last column is a zero
	SpecColumnScale = 4 // float64 scale[row_width] follows the frequencies
	specFlagsAll    = SpecInterleaved | SpecZeroLast | SpecColumnScale
)

// request is one request frame's header fields and body parts; the body is written at send time.
type request struct {
	opcode    Opcode
	dtype     Dtype
	tableID   uint32
	aux       []byte
	spec      *InlineSpec // ENCODE_SPEC: the aux block, appended at send time
	positions Positions
}

// count is the number of positions (0 without any).
func (r *request) count() uint64 {
	if r.positions == nil {
		return 0
	}
	return r.positions.count()
}

// check refuses, before anything is sent, a request whose frame the header cannot describe.
func (r *request) check() error {
	if r.spec != nil {
		if err := r.spec.Validate(); err != nil {
			return err
		}
	}
	if r.positions != nil {
		if err := r.positions.check(); err != nil {
			return err
		}
	}
	if n := r.count(); n > math.MaxUint32 || HeaderSize+uint64(r.auxLen())+8*n > math.MaxUint32 {
		return argError("positions", "%d positions do not fit one frame (its length and count are u32)", n)
	}
	return nil
}

func (r *request) auxLen() int {
	if r.spec != nil {
		return r.spec.auxLen()
	}
	return len(r.aux)
}

// appendFrame appends the request's frame, with this request id, to b.
func (r *request) appendFrame(b []byte, requestID uint64) []byte {
	count := r.count()
	auxLen := r.auxLen()
	kind := Int64Positions
	if r.positions != nil {
		kind = r.positions.kind()
	}
	var h [HeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(HeaderSize+auxLen+8*int(count)))
	h[4], h[5], h[6], h[7] = ProtocolVersion, byte(r.opcode), byte(r.dtype), byte(kind)
	binary.LittleEndian.PutUint64(h[8:], requestID)
	binary.LittleEndian.PutUint32(h[16:], r.tableID)
	binary.LittleEndian.PutUint32(h[20:], uint32(count))
	binary.LittleEndian.PutUint32(h[24:], uint32(auxLen))
	b = append(b, h[:]...)
	if r.spec != nil {
		b = r.spec.appendAux(b)
	} else {
		b = append(b, r.aux...)
	}
	if r.positions != nil {
		b = r.positions.appendTo(b)
	}
	return b
}

// replyHeader is a reply frame's header.
type replyHeader struct {
	length    uint32
	opcode    Opcode
	status    Status
	dtype     Dtype
	requestID uint64
	rows      uint32
	width     uint32
	auxLen    uint32
	tableID   uint32
}

// parseReplyHeader decodes and checks a reply header: its version, that the aux block fits, and that
// a success's length is its rows' size.
func parseReplyHeader(b []byte) (replyHeader, error) {
	h := replyHeader{
		length: binary.LittleEndian.Uint32(b[0:]), opcode: Opcode(b[5]), status: Status(b[6]), dtype: Dtype(b[7]),
		requestID: binary.LittleEndian.Uint64(b[8:]), rows: binary.LittleEndian.Uint32(b[16:]),
		width: binary.LittleEndian.Uint32(b[20:]), auxLen: binary.LittleEndian.Uint32(b[24:]),
		tableID: binary.LittleEndian.Uint32(b[28:]),
	}
	if b[4] != ProtocolVersion || h.length < HeaderSize || h.auxLen > h.length-HeaderSize {
		return h, fmt.Errorf("posenc: bad reply header (version %d, length %d, aux_len %d)", b[4], h.length, h.auxLen)
	}
	if h.status == StatusOK {
		body := uint64(h.rows) * uint64(h.width) * uint64(h.dtype.Size())
		if h.dtype.Size() == 0 || uint64(h.length) != HeaderSize+uint64(h.auxLen)+body {
			return h, fmt.Errorf("posenc: reply length %d does not match %dx%d rows of %v", h.length, h.rows, h.width,
				h.dtype)
		}
	}
	return h, nil
}
