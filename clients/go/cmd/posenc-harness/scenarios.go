package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"posenc.dev/posenc"
	"posenc.dev/posenc/shm"
)

// runScenario runs one scenario of tests/clients/README.md; its result line (nil: it printed its own).
func runScenario(name, address, dir string) (map[string]any, error) {
	switch name {
	case "concurrency":
		return concurrency(address, dir)
	case "reconnect":
		return reconnect(address, dir)
	case "drain":
		return drain(address, dir)
	case "shm-replace":
		return shmReplace(dir)
	case "shm-read":
		return nil, shmRead(dir)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// sin128Checker compares rows from the server with sin128's rows in shared memory.
type sin128Checker struct{ table *shm.Table }

func newChecker(dir string) (*sin128Checker, error) {
	t, err := shm.Attach(dir, "sin128", true)
	return &sin128Checker{t}, err
}

func (c *sin128Checker) check(rows *posenc.Rows, positions []int64) error {
	want, err := c.table.Lookup(positions, nil)
	if err != nil {
		return err
	}
	if rows.Dtype != posenc.Float32 || !bytes.Equal(rows.Data, want) {
		return fmt.Errorf("the rows of %v are not sin128's", positions)
	}
	return nil
}

func randomPositions(rng *rand.Rand, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = rng.Int63n(4096)
	}
	return out
}

// waitLine blocks until a line (or EOF) arrives on stdin.
func waitLine() {
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// concurrency: 32 goroutines on one pool of 4 connections, 100 calls each, every row checked.
func concurrency(address, dir string) (map[string]any, error) {
	const workers, calls, perCall = 32, 100, 4
	checker, err := newChecker(dir)
	if err != nil {
		return nil, err
	}
	client, err := posenc.NewClient(address, &posenc.Options{PoolSize: 4})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var requests, rowsChecked atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for k := 0; k < calls; k++ {
				table := [...]string{"sin128", "sin128-any"}[k%2]
				positions := randomPositions(rng, perCall)
				rows, err := client.Encode(context.Background(), table, posenc.Int64s(positions), posenc.Float32)
				if err == nil {
					err = checker.check(rows, positions)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", table, err)
					return
				}
				requests.Add(1)
				rowsChecked.Add(perCall)
			}
		}(int64(w))
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return map[string]any{"ok": true, "workers": workers, "requests": requests.Load(),
		"rows_checked": rowsChecked.Load(), "pool_size": client.PoolSize()}, nil
}

// reconnect: calls across an idle close and, after the ready line, across a server restart.
func reconnect(address, dir string) (map[string]any, error) {
	checker, err := newChecker(dir)
	if err != nil {
		return nil, err
	}
	client, err := posenc.NewClient(address, &posenc.Options{PoolSize: 2})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	positions := []int64{0, 17, 4095}
	check := func(when string) error {
		rows, err := client.Encode(context.Background(), "sin128", posenc.Int64s(positions), posenc.Float32)
		if err == nil {
			err = checker.check(rows, positions)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", when, err)
		}
		return nil
	}
	for _, when := range []string{"first call", "second call"} {
		if err := check(when); err != nil {
			return nil, err
		}
	}
	time.Sleep(1500 * time.Millisecond) // the server closes both idle connections (IDLE_TIMEOUT)
	for _, when := range []string{"after the idle close", "after the idle close, second connection"} {
		if err := check(when); err != nil {
			return nil, err
		}
	}
	emit(map[string]any{"event": "ready"})
	waitLine()
	calls := 0
	for ; calls < 2*client.PoolSize(); calls++ { // every pooled connection meets the restart
		if err := check(fmt.Sprintf("call %d after the restart", calls+1)); err != nil {
			return nil, err
		}
	}
	return map[string]any{"ok": true, "calls_after_restart": calls}, nil
}

// drain: 16 calls in flight on one connection until the line that follows SIGTERM; then every reply,
// then a clean EOF.
func drain(address, dir string) (map[string]any, error) {
	const inFlight = 16
	checker, err := newChecker(dir)
	if err != nil {
		return nil, err
	}
	conn, err := posenc.DialConn(context.Background(), address, nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.TableID(context.Background(), "sin128"); err != nil {
		return nil, err
	}
	var sent, answered atomic.Int64
	var stop atomic.Bool
	ready := make(chan struct{})
	var readyOnce sync.Once
	errs := make(chan error, inFlight)
	var wg sync.WaitGroup
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for !stop.Load() {
				positions := randomPositions(rng, 4)
				sent.Add(1)
				rows, err := conn.Encode(context.Background(), "sin128", posenc.Int64s(positions), posenc.Float32)
				if err == nil {
					err = checker.check(rows, positions)
				}
				if err != nil {
					errs <- err
					return
				}
				if answered.Add(1) >= 100 {
					readyOnce.Do(func() { close(ready) })
				}
			}
		}(int64(w))
	}
	select {
	case <-ready:
	case err := <-errs:
		return nil, err
	}
	emit(map[string]any{"event": "ready"})
	waitLine()
	stop.Store(true)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("after %d answers: %w", answered.Load(), err)
	}
	end := "no end within 5 s"
	select {
	case <-conn.Done():
		end = fmt.Sprint(conn.Err())
		if errors.Is(conn.Err(), io.EOF) {
			end = "eof"
		}
	case <-time.After(5 * time.Second):
	}
	result := map[string]any{"ok": end == "eof" && sent.Load() == answered.Load(), "sent": sent.Load(),
		"answered": answered.Load(), "end": end}
	if result["ok"] != true {
		return result, fmt.Errorf("sent %d, answered %d, end %s", sent.Load(), answered.Load(), end)
	}
	return result, nil
}
