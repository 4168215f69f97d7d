package shm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/bits"
	"sync/atomic"
	"syscall"
	"unsafe"

	"posenc.dev/posenc/internal/tablename"
)

// The segment format (docs/shm-format.md, "Segment layout").
const (
	HeaderSize = 256
	stateReady = 2
)

var (
	segmentMagic  = []byte("POSENCTB")
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
	stateNames    = map[uint32]string{0: "EMPTY", 1: "BUILDING", 2: "READY"}
	itemsizes     = map[Dtype]uint32{Float32: 4, Float64: 8, Computed: 1}
	checksumNames = map[Checksum]string{CRC32: "crc32", CRC32C: "crc32c"}
)

// Dtype is what a segment's data holds.
type Dtype uint32

// The data of a segment: float32 or float64 rows, or a computed table's spec block.
const (
	Float32  Dtype = 1
	Float64  Dtype = 2
	Computed Dtype = 3
)

func (d Dtype) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Computed:
		return "computed"
	}
	return fmt.Sprintf("dtype %d", uint32(d))
}

// Checksum is a segment's data checksum algorithm.
type Checksum uint32

// CRC-32 (zlib's) or CRC-32C (Castagnoli).
const (
	CRC32  Checksum = 0
	CRC32C Checksum = 1
)

func (c Checksum) String() string { return checksumNames[c] }

// Header is a segment's header fields.
type Header struct {
	HeaderCRC, DataCRC uint32
	Dtype              Dtype
	Itemsize           uint32
	Rows, Width        uint64
	Start              int64
	DataOffset         uint64
	DataNbytes         uint64
	Generation         uint64
	CreatedNs          int64
	WriterPid          uint32
	SpecLen            uint32
	SpecHash           string
	Name               string
	Checksum           Checksum
}

// segment is a mapped segment file that passed every check.
type segment struct {
	Header
	path    string
	mapping []byte
}

// openSegment maps path read-only and checks it as docs/shm-format.md's "Validating a segment" says,
// in its order; verify adds the data checksum. A file that is gone is returned as the open error
// (fs.ErrNotExist: the caller reads the registry again); every refusal is an *Error "segment".
func openSegment(path string, verify bool) (*segment, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err == syscall.ENOENT {
		return nil, err
	}
	if err != nil {
		return nil, &Error{"segment", fmt.Sprintf("%s: cannot open: %v", path, err)}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &Error{"segment", fmt.Sprintf("%s: cannot stat: %v", path, err)}
	}
	if st.Size < HeaderSize { // 1.
		syscall.Close(fd)
		return nil, &Error{"segment", fmt.Sprintf("%s: truncated: %d bytes, a header needs %d", path, st.Size,
			HeaderSize)}
	}
	m, err := syscall.Mmap(fd, 0, int(st.Size), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	syscall.Close(fd)
	if err != nil {
		return nil, &Error{"segment", fmt.Sprintf("%s: cannot map: %v", path, err)}
	}
	s := &segment{path: path, mapping: m}
	if err := s.check(verify); err != nil {
		syscall.Munmap(m)
		return nil, err
	}
	return s, nil
}

func (s *segment) fail(format string, args ...any) *Error {
	return &Error{"segment", s.path + ": " + fmt.Sprintf(format, args...)}
}

// check runs the checks 2 to 10 (the size of a header was checked before mapping).
func (s *segment) check(verify bool) error {
	m := s.mapping
	// The acquire load of state comes before any other read of the mapping: what the writer stored
	// before READY is then visible. (A sync/atomic load is sequentially consistent.)
	state := atomic.LoadUint32((*uint32)(unsafe.Pointer(&m[12])))
	if !bytes.Equal(m[:8], segmentMagic) { // 2.
		return s.fail("bad magic %q (expected %q): not a posenc table", m[:8], segmentMagic)
	}
	if version := binary.LittleEndian.Uint32(m[8:]); version != 1 { // 3.
		return s.fail("unknown format version %d (this reader knows 1)", version)
	}
	s.Header = decodeHeader(m)
	if problem := s.inconsistency(); problem != "" { // 4.
		return s.fail("inconsistent header: %s", problem)
	}
	if state != stateReady { // 5.
		name, known := stateNames[state]
		if !known {
			name = fmt.Sprint(state)
		}
		return s.fail("not READY (state %s): being written, or its writer died", name)
	}
	size := uint64(len(m)) // 6. (data_offset is small and data_nbytes was checked against rows*width)
	if want := s.DataOffset + s.DataNbytes; s.DataNbytes > size || size < want {
		return s.fail("truncated: %d bytes, the header says %d", size, want)
	} else if size > want {
		return s.fail("trailing bytes: %d bytes, the header says %d", size, want)
	}
	if crc := headerCRC(m, s.SpecLen); crc != s.HeaderCRC { // 7.
		return s.fail("header checksum mismatch (stored %#08x, computed %#08x)", s.HeaderCRC, crc)
	}
	specEnd := HeaderSize + uint64(s.SpecLen)
	if !allZero(m[specEnd:s.DataOffset]) { // 8.
		return s.fail("non-zero padding after the spec JSON")
	}
	digest := sha256.Sum256(m[HeaderSize:specEnd]) // 9.
	if hex.EncodeToString(digest[:8]) != s.SpecHash {
		return s.fail("spec JSON does not match its hash %s", s.SpecHash)
	}
	if verify { // 10.
		return s.verify()
	}
	return nil
}

func decodeHeader(m []byte) Header {
	le := binary.LittleEndian
	name := m[112:176]
	if end := bytes.IndexByte(name, 0); end >= 0 {
		name = name[:end]
	}
	return Header{
		HeaderCRC: le.Uint32(m[16:]), DataCRC: le.Uint32(m[20:]), Dtype: Dtype(le.Uint32(m[24:])),
		Itemsize: le.Uint32(m[28:]), Rows: le.Uint64(m[32:]), Width: le.Uint64(m[40:]), Start: int64(le.Uint64(m[48:])),
		DataOffset: le.Uint64(m[56:]), DataNbytes: le.Uint64(m[64:]), Generation: le.Uint64(m[72:]),
		CreatedNs: int64(le.Uint64(m[80:])), WriterPid: le.Uint32(m[88:]), SpecLen: le.Uint32(m[92:]),
		SpecHash: string(m[96:112]), Name: string(name), Checksum: Checksum(le.Uint32(m[176:])),
	}
}

// inconsistency is the first failing check of step 4, in the document's words ("" when none fails).
func (s *segment) inconsistency() string {
	h, m := &s.Header, s.mapping
	itemsize, known := itemsizes[h.Dtype]
	switch {
	case !known || itemsize != h.Itemsize:
		return "unknown dtype code or itemsize"
	case h.Rows < 1 || h.Width < 1:
		return "rows and width must be >= 1"
	case h.Dtype == Computed && (h.DataNbytes < 64 || h.DataNbytes%8 != 0):
		return "a computed table's data_nbytes is not 32 + an inline spec block"
	case h.Dtype != Computed && !productIs(h.Rows, h.Width, uint64(h.Itemsize), h.DataNbytes):
		return "data_nbytes is not rows * width * itemsize"
	case h.Rows > maxGeneration || h.Start > int64(maxGeneration-h.Rows):
		return "start + rows overflows int64"
	case h.SpecLen == 0 || h.DataOffset != (HeaderSize+uint64(h.SpecLen)+63)/64*64:
		return "data_offset does not follow spec_len"
	case h.Generation < 1 || h.Generation > maxGeneration:
		return "generation outside 1..2^63-1"
	case h.Checksum != CRC32 && h.Checksum != CRC32C:
		return "unknown checksum algorithm"
	case !lowerHex(h.SpecHash):
		return "spec_hash is not 16 lowercase hex digits"
	case tablename.Check(h.Name) != nil || !allZero(m[112+len(h.Name):176]):
		return "name is not a valid NUL-padded table name"
	case !allZero(m[180:HeaderSize]):
		return "reserved bytes are not zero"
	}
	return ""
}

// verify compares the data checksum, by the header's algorithm, with data_crc.
func (s *segment) verify() error {
	data := s.data()
	var crc uint32
	if s.Checksum == CRC32C {
		crc = crc32.Checksum(data, castagnoli)
	} else {
		crc = crc32.ChecksumIEEE(data)
	}
	if crc != s.DataCRC {
		return s.fail("data checksum mismatch (stored %#08x, computed %#08x, %v): the table was modified or corrupted",
			s.DataCRC, crc, s.Checksum)
	}
	return nil
}

func (s *segment) data() []byte {
	end := s.DataOffset + s.DataNbytes
	return s.mapping[s.DataOffset:end:end]
}

// headerCRC is CRC-32 (zlib's) of the header with state and header_crc (bytes 12..19) zeroed, then
// of the spec JSON.
func headerCRC(m []byte, specLen uint32) uint32 {
	header := make([]byte, HeaderSize)
	copy(header, m[:HeaderSize])
	copy(header[12:20], make([]byte, 8))
	crc := crc32.ChecksumIEEE(header)
	return crc32.Update(crc, crc32.IEEETable, m[HeaderSize:HeaderSize+uint64(specLen)])
}

// productIs says whether a*b*c, computed without wrapping past 64 bits, is want.
func productIs(a, b, c, want uint64) bool {
	hi, ab := bits.Mul64(a, b)
	if hi != 0 {
		return false
	}
	hi, abc := bits.Mul64(ab, c)
	return hi == 0 && abc == want
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return len(s) == 16
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
