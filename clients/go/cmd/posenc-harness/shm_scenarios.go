package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"

	"posenc.dev/posenc/shm"
)

// shmReplace reads table "flip" while it is republished, until a line on stdin (README: shm-replace).
func shmReplace(dir string) (map[string]any, error) {
	r := &replaceReader{dir: dir, reference: map[string][]byte{}, digests: map[string]string{},
		generations: map[uint64]bool{}}
	t, err := r.attach()
	if err != nil {
		return nil, err
	}
	emit(map[string]any{"event": "ready"})
	stop := make(chan struct{})
	go func() { waitLine(); close(stop) }()
	rng := rand.New(rand.NewSource(1))
	var held []*shm.Table
	rowsRead, rechecked := 0, 0
	for running := true; running; {
		select {
		case <-stop:
			running = false
		default:
		}
		for i := 0; i < 64; i++ {
			p := t.Start + rng.Int63n(int64(t.Rows))
			if err := r.checkRow(t, p); err != nil {
				return nil, err
			}
			rowsRead++
		}
		current, err := t.Current()
		if err != nil {
			return nil, err
		}
		if current {
			continue
		}
		next, err := r.attach()
		if err != nil {
			return nil, err
		}
		held, t = append(held, t), next
		if len(held) > 2 { // replaced twice and unlinked: its mapping must still hold its rows
			if err := r.checkAll(held[0]); err != nil {
				return nil, err
			}
			held[0].Close()
			held, rechecked = held[1:], rechecked+1
		}
	}
	for _, old := range held {
		if err := r.checkAll(old); err != nil {
			return nil, err
		}
		old.Close()
		rechecked++
	}
	t.Close()
	generations := []uint64{}
	for g := range r.generations {
		generations = append(generations, g)
	}
	return map[string]any{"ok": true, "generations": generations, "digests": r.digests, "attaches": r.attaches,
		"rows_read": rowsRead, "old_rechecked": rechecked}, nil
}

// replaceReader keeps, per spec_hash, the data of the first generation seen (verified by its checksum).
type replaceReader struct {
	dir         string
	reference   map[string][]byte
	digests     map[string]string
	generations map[uint64]bool
	attaches    int
}

func (r *replaceReader) attach() (*shm.Table, error) {
	t, err := shm.Attach(r.dir, "flip", true)
	if err != nil {
		return nil, err
	}
	r.attaches++
	r.generations[t.Generation] = true
	if _, seen := r.reference[t.SpecHash]; !seen {
		r.reference[t.SpecHash] = append([]byte(nil), t.Data()...)
		digest := sha256.Sum256(t.Data())
		r.digests[t.SpecHash] = hex.EncodeToString(digest[:])
	}
	return t, r.checkAll(t)
}

func (r *replaceReader) checkAll(t *shm.Table) error {
	if !bytes.Equal(t.Data(), r.reference[t.SpecHash]) {
		return fmt.Errorf("generation %d: its data is not its spec's", t.Generation)
	}
	return nil
}

func (r *replaceReader) checkRow(t *shm.Table, position int64) error {
	row, err := t.Row(position)
	if err != nil {
		return err
	}
	size := int64(len(row))
	first := (position - t.Start) * size
	if !bytes.Equal(row, r.reference[t.SpecHash][first:first+size]) {
		return fmt.Errorf("generation %d: a torn row at position %d", t.Generation, position)
	}
	return nil
}

// shmRead answers one line per request line on stdin (README: shm-read).
func shmRead(dir string) error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	for in.Scan() {
		var ask struct {
			Table     string  `json:"table"`
			Positions []int64 `json:"positions"`
			Verify    bool    `json:"verify"`
		}
		if err := json.Unmarshal(in.Bytes(), &ask); err != nil {
			return err
		}
		emit(readTable(dir, ask.Table, ask.Positions, ask.Verify))
	}
	return in.Err()
}

func readTable(dir, name string, positions []int64, verify bool) map[string]any {
	t, err := shm.Attach(dir, name, verify)
	var data []byte
	if err == nil {
		defer t.Close()
		data, err = t.Lookup(positions, nil)
	}
	var refusal *shm.Error
	if errors.As(err, &refusal) {
		return map[string]any{"table": name, "ok": false, "field": refusal.Field, "error": refusal.Message}
	}
	if err != nil {
		return map[string]any{"table": name, "ok": false, "field": "", "error": err.Error()}
	}
	return map[string]any{"table": name, "ok": true, "generation": t.Generation, "dtype": t.Dtype.String(),
		"start": t.Start, "rows": t.Rows, "width": t.Width, "spec_hash": t.SpecHash,
		"checksum": t.Checksum.String(), "data_hex": hex.EncodeToString(data)}
}
