// Package shm reads the tables posenc publishes in shared memory (docs/shm-format.md) with no request
// at all: it maps a table's current segment read-only, checks it as the format says (in its order,
// the data checksum too when asked), and looks rows up in the mapping without copying the table.
//
//	t, err := shm.Attach("", "sin128", true) // "" : $POSENC_SHM_DIR, else /dev/shm
//	row, err := t.Float32Row(4096)           // a []float32 view of the mapping
//	defer t.Close()
//
// A reader never writes, locks or unlinks anything. Linux, little-endian CPUs (x86-64, arm64).
package shm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"posenc.dev/posenc/internal/tablename"
)

// DefaultDir is where tables live unless POSENC_SHM_DIR or a directory says otherwise.
const DefaultDir = "/dev/shm"

// attachAttempts bounds the re-reads of the registry when a table is replaced between reading its
// slot and opening its file.
const attachAttempts = 32

// Error is a refusal, naming what was wrong: "name" (not a table name, no such table), "registry",
// "segment" (a check of the format failed: Message holds the document's words) or "positions".
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return "posenc shm: " + e.Field + ": " + e.Message }

// Table is one generation of a published table, mapped read-only. Its rows are positions
// Start .. Stop()-1; the mapping stays valid after the table is replaced or removed, until Close.
type Table struct {
	Header
	Path     string
	seg      *segment
	registry *registry
}

// Dir is the shm directory: dir, else $POSENC_SHM_DIR, else /dev/shm.
func Dir(dir string) string {
	if dir != "" {
		return dir
	}
	if env := os.Getenv("POSENC_SHM_DIR"); env != "" {
		return env
	}
	return DefaultDir
}

// Attach maps the current generation of table name in dir (Dir's rules) and checks it; verify also
// checks the data checksum (one pass over the table: a segment never changes, so once is enough).
func Attach(dir, name string, verify bool) (*Table, error) {
	if !littleEndian {
		return nil, &Error{"segment", "this reader maps little-endian values and runs on little-endian CPUs only"}
	}
	dir = Dir(dir)
	if err := tablename.Check(name); err != nil {
		return nil, &Error{"name", err.Error()}
	}
	reg, err := openRegistry(dir)
	if err != nil {
		return nil, err
	}
	if reg.m == nil {
		return nil, &Error{"name", fmt.Sprintf("no table named '%s' in %s (no registry there yet)", name, dir)}
	}
	t, err := attachCurrent(reg, dir, name, verify)
	if err != nil {
		reg.close()
		return nil, err
	}
	return t, nil
}

func attachCurrent(reg *registry, dir, name string, verify bool) (*Table, error) {
	for attempt := 0; attempt < attachAttempts; attempt++ {
		generation, found, err := reg.generation(name)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, &Error{"name", fmt.Sprintf("no table named '%s' in %s", name, dir)}
		}
		path := filepath.Join(dir, fmt.Sprintf("posenc.%s.%d", name, generation))
		seg, err := openSegment(path, verify)
		if errors.Is(err, fs.ErrNotExist) {
			if again, found, _ := reg.generation(name); found && again == generation {
				return nil, &Error{"segment", path + ": the registry names it but the file is gone"}
			}
			continue // replaced between our registry read and our open: read it again
		}
		if err != nil {
			return nil, err
		}
		if seg.Name != name || seg.Generation != generation {
			syscall.Munmap(seg.mapping)
			return nil, &Error{"segment", fmt.Sprintf("%s: header names another table or generation (table '%s' "+
				"generation %d, expected '%s' generation %d)", path, seg.Name, seg.Generation, name, generation)}
		}
		return &Table{Header: seg.Header, Path: path, seg: seg, registry: reg}, nil
	}
	return nil, &Error{"registry", fmt.Sprintf("table '%s' was replaced %d times while attaching", name,
		attachAttempts)}
}

// Stop is one past the last position.
func (t *Table) Stop() int64 { return t.Start + int64(t.Rows) }

// SpecJSON is the table spec as stored (UTF-8 JSON, posenc.tables.TableSpec's form).
func (t *Table) SpecJSON() []byte { return t.seg.mapping[HeaderSize : HeaderSize+uint64(t.SpecLen)] }

// Data is the table's data, a read-only view of the mapping: the rows, row after row (a computed
// table: its spec block). Writing into it faults.
func (t *Table) Data() []byte { return t.seg.data() }

// Verify checks the data checksum (what Attach(..., true) did).
func (t *Table) Verify() error { return t.seg.verify() }

// Current says whether the registry still names this generation (false once the table was replaced
// or removed: Attach again for the new one).
func (t *Table) Current() (bool, error) {
	generation, found, err := t.registry.generation(t.Name)
	return found && generation == t.Generation, err
}

// Row is the bytes of the row of position, a view of the mapping (little-endian values of the
// table's dtype). A computed table stores no rows: ask posenc-server (ENCODE_TABLE) for them.
func (t *Table) Row(position int64) ([]byte, error) {
	if t.Dtype == Computed {
		return nil, &Error{"positions", fmt.Sprintf("table '%s' is a named computed encoding: it stores no rows "+
			"(posenc-server's ENCODE_TABLE computes them)", t.Name)}
	}
	if position < t.Start || position >= t.Stop() {
		return nil, &Error{"positions", fmt.Sprintf("position %d is outside table '%s', which holds positions "+
			"[%d, %d)", position, t.Name, t.Start, t.Stop())}
	}
	size := t.Width * uint64(t.Itemsize)
	first := uint64(position-t.Start) * size
	return t.seg.data()[first : first+size : first+size], nil
}

// Float32Row is the row of position as a []float32 view of the mapping (a float32 table).
func (t *Table) Float32Row(position int64) ([]float32, error) {
	row, err := t.typedRow(position, Float32)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&row[0])), t.Width), nil
}

// Float64Row is the row of position as a []float64 view of the mapping (a float64 table).
func (t *Table) Float64Row(position int64) ([]float64, error) {
	row, err := t.typedRow(position, Float64)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&row[0])), t.Width), nil
}

func (t *Table) typedRow(position int64, dtype Dtype) ([]byte, error) {
	if t.Dtype != dtype && t.Dtype != Computed {
		return nil, &Error{"dtype", fmt.Sprintf("table '%s' holds %v rows, not %v", t.Name, t.Dtype, dtype)}
	}
	return t.Row(position)
}

// Lookup appends the bytes of the rows of positions to out (a copy: rows for a reply or a batch).
func (t *Table) Lookup(positions []int64, out []byte) ([]byte, error) {
	for _, p := range positions {
		row, err := t.Row(p)
		if err != nil {
			return out, err
		}
		out = append(out, row...)
	}
	return out, nil
}

// Close unmaps the table (views of it must not be used after). It never unlinks anything.
func (t *Table) Close() error {
	if t.seg != nil {
		syscall.Munmap(t.seg.mapping)
		t.seg = nil
		t.registry.close()
	}
	return nil
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
