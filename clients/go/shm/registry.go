package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The registry's layout (docs/shm-format.md, "Registry layout").
const (
	RegistryFile     = "posenc-registry"
	registrySize     = 128 + registrySlots*slotSize // 131 200 bytes
	registrySlots    = 1024
	slotSize         = 128
	maxGeneration    = 1<<63 - 1
	busyRegistryWait = 2 * time.Second
)

var registryMagic = []byte("POSENCRG")

// registry is a read-only mapping of a shm directory's posenc-registry (nil m: there is none yet).
type registry struct {
	path string
	m    []byte
}

// openRegistry maps dir's registry. No file, or a file still being created (shorter than the layout
// with a zero magic), is a registry without tables; any other failure names the file.
func openRegistry(dir string) (*registry, error) {
	r := &registry{path: filepath.Join(dir, RegistryFile)}
	fd, err := syscall.Open(r.path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, &Error{"registry", fmt.Sprintf("%s: cannot open: %v", r.path, err)}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &Error{"registry", fmt.Sprintf("%s: cannot stat: %v", r.path, err)}
	}
	if st.Size < registrySize {
		head := make([]byte, 8)
		n, _ := syscall.Pread(fd, head, 0)
		if n < 8 || bytes.Equal(head, make([]byte, 8)) {
			return r, nil // being created: no table yet
		}
		return nil, &Error{"registry", fmt.Sprintf("%s: truncated registry (%d bytes)", r.path, st.Size)}
	}
	r.m, err = syscall.Mmap(fd, 0, registrySize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, &Error{"registry", fmt.Sprintf("%s: cannot map: %v", r.path, err)}
	}
	return r, nil
}

func (r *registry) close() {
	if r.m != nil {
		syscall.Munmap(r.m)
		r.m = nil
	}
}

// generation is the generation the registry names for name (false: no such table), from the first
// slot holding the name, each slot read under its seqlock.
func (r *registry) generation(name string) (uint64, bool, error) {
	if r.m == nil || bytes.Equal(r.m[:8], make([]byte, 8)) {
		return 0, false, nil // none yet, or being created (the magic is stored last)
	}
	if !bytes.Equal(r.m[:8], registryMagic) {
		return 0, false, &Error{"registry", r.path + ": bad magic: corrupted registry"}
	}
	le := binary.LittleEndian
	if le.Uint32(r.m[8:]) != 1 || le.Uint32(r.m[12:]) != registrySlots || le.Uint32(r.m[16:]) != slotSize {
		return 0, false, &Error{"registry", r.path + ": unknown registry layout"}
	}
	var want [64]byte
	copy(want[:], name)
	for i := 0; i < registrySlots; i++ {
		generation, slotName, err := r.slot(i)
		if err != nil {
			return 0, false, err
		}
		if generation == 0 || slotName != want {
			continue
		}
		if generation > maxGeneration {
			return 0, false, &Error{"registry", fmt.Sprintf("%s: corrupted slot: '%s' has generation %d", r.path, name,
				generation)}
		}
		return generation, true, nil
	}
	return 0, false, nil
}

// slot copies slot i under its seqlock: seq (even), generation and name, seq again, retried until the
// two seq loads agree. Every load is a sync/atomic load, sequentially consistent in Go's memory model,
// so the copy's loads stay between the two seq loads on any CPU (an acquire load and fence, as the
// format asks). A slot odd for 2 s is a registry that "stayed busy".
func (r *registry) slot(i int) (uint64, [64]byte, error) {
	base := 128 + slotSize*i
	var name [64]byte
	var deadline time.Time
	for spins := 1; ; spins++ {
		seq := atomic.LoadUint64(word(r.m, base))
		if seq&1 == 0 {
			generation := atomic.LoadUint64(word(r.m, base+8))
			for k := 0; k < 8; k++ {
				*(*uint64)(unsafe.Pointer(&name[8*k])) = atomic.LoadUint64(word(r.m, base+16+8*k))
			}
			if atomic.LoadUint64(word(r.m, base)) == seq {
				return generation, name, nil
			}
		}
		if spins%1024 == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(busyRegistryWait)
			} else if time.Now().After(deadline) {
				return 0, name, &Error{"registry", fmt.Sprintf("%s: slot %d stayed busy for %v (a writer died "+
					"mid-update?); the next publish clears it", r.path, i, busyRegistryWait)}
			}
			runtime.Gosched()
		}
	}
}

// word is the 8-byte-aligned u64 at offset of a mapping (mappings start on a page).
func word(m []byte, offset int) *uint64 {
	return (*uint64)(unsafe.Pointer(&m[offset]))
}
