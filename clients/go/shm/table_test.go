package shm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func refusal(t *testing.T, err error, field, words string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Field != field || !strings.Contains(e.Message, words) {
		t.Fatalf("want %s: ...%s..., got %v", field, words, err)
	}
}

func TestNamesAreCheckedBeforeAnyFile(t *testing.T) {
	for _, name := range []string{"", ".", "a/b", "a..b", "../x", strings.Repeat("x", 65), "sin 128", "sin\u00e9"} {
		_, err := Attach(t.TempDir(), name, true)
		refusal(t, err, "name", "")
	}
}

// docs/shm-format.md, "Reading the registry": no file, or one being created, has no table yet; a
// short file with a magic, or another magic, is corrupt.
func TestRegistryStates(t *testing.T) {
	dir := t.TempDir()
	_, err := Attach(dir, "sin128", true)
	refusal(t, err, "name", "no table named 'sin128' in "+dir+" (no registry there yet)")

	registry := filepath.Join(dir, RegistryFile)
	os.WriteFile(registry, make([]byte, 100), 0o600)
	_, err = Attach(dir, "sin128", true)
	refusal(t, err, "name", "no table named 'sin128'")

	os.WriteFile(registry, []byte("POSENCRG and then nothing"), 0o600)
	_, err = Attach(dir, "sin128", true)
	refusal(t, err, "registry", "truncated registry")

	whole := make([]byte, registrySize)
	os.WriteFile(registry, whole, 0o600)
	_, err = Attach(dir, "sin128", true)
	refusal(t, err, "name", "no table named 'sin128' in "+dir)

	copy(whole, "POSENCXX")
	os.WriteFile(registry, whole, 0o600)
	_, err = Attach(dir, "sin128", true)
	refusal(t, err, "registry", "bad magic: corrupted registry")

	copy(whole, "POSENCRG")
	whole[8] = 2
	os.WriteFile(registry, whole, 0o600)
	_, err = Attach(dir, "sin128", true)
	refusal(t, err, "registry", "unknown registry layout")
}

func TestTheRegistryNamesAFileThatIsGone(t *testing.T) {
	dir := t.TempDir()
	whole := make([]byte, registrySize)
	copy(whole, "POSENCRG")
	whole[8], whole[12], whole[13], whole[16] = 1, 0x00, 0x04, 128 // version 1, capacity 1024, slot_size 128
	slot := whole[128+128*5:]
	slot[8] = 7 // generation 7 in slot 5
	copy(slot[16:], "sin128")
	os.WriteFile(filepath.Join(dir, RegistryFile), whole, 0o600)
	_, err := Attach(dir, "sin128", true)
	refusal(t, err, "segment", filepath.Join(dir, "posenc.sin128.7")+": the registry names it but the file is gone")

	os.WriteFile(filepath.Join(dir, "posenc.sin128.7"), []byte("short"), 0o600)
	_, err = Attach(dir, "sin128", true)
	refusal(t, err, "segment", "truncated: 5 bytes, a header needs 256")
}
