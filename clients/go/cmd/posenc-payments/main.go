// Command posenc-payments drives the payments scenario (docs/benchmarks.md, `posenc bench clients`)
// through the Go client, as a Go service would call it: one Client (a pool of -pool connections)
// shared by -workers goroutines, each asking the row of one random millisecond timestamp at a time
// from a table (a named computed encoding), float32.
//
//	posenc-payments -address 127.0.0.1:8001 -table payments-sin128-any -seconds 2 -warmup 1 \
//	    [-rate 100000] [-workers 256] [-pool 4] [-positions 1700000000000:1800000000000] [-seed 1]
//
// Without -rate it is a closed loop (each worker sends its next request when its last is answered);
// with -rate R an open loop: request k is due at start + k/R, taken by the next free worker, and its
// latency counts from when it was due (queueing included). It prints one JSON object: rps and
// completed (the replies that arrived in the measured seconds), errors, and p50_us, p99_us, p999_us,
// max_us: exact percentiles of the latencies of every request sent (closed loop) or due (open loop)
// in the measured seconds.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"posenc.dev/posenc"
)

func main() {
	address := flag.String("address", "127.0.0.1:8001", "the server: host:port or unix:/path")
	table := flag.String("table", "payments-sin128-any", "the table whose rows are asked")
	seconds := flag.Float64("seconds", 2, "measured seconds")
	warmup := flag.Float64("warmup", 1, "seconds before measuring")
	rate := flag.Float64("rate", 0, "offered requests per second (0: a closed loop)")
	workers := flag.Int("workers", 256, "goroutines calling the client")
	pool := flag.Int("pool", 4, "connections of the client's pool")
	positions := flag.String("positions", "1700000000000:1800000000000", "positions LO:HI, uniform in [LO, HI)")
	seed := flag.Int64("seed", 1, "seed of the positions")
	flag.Parse()
	lo, hi, err := span(*positions)
	if err == nil && (*workers < 1 || *seconds <= 0 || *warmup < 0 || *rate < 0) {
		err = fmt.Errorf("-workers, -seconds, -warmup and -rate must be positive")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "posenc-payments:", err)
		os.Exit(2)
	}
	client, err := posenc.NewClient(*address, &posenc.Options{PoolSize: *pool})
	if err != nil {
		fmt.Fprintln(os.Stderr, "posenc-payments:", err)
		os.Exit(2)
	}
	defer client.Close()
	run := &load{client: client, table: *table, lo: lo, hi: hi, rate: *rate,
		start: time.Now().Add(50 * time.Millisecond)}
	run.from = run.start.Add(time.Duration(*warmup * float64(time.Second)))
	run.until = run.from.Add(time.Duration(*seconds * float64(time.Second)))
	report := run.drive(*workers, *seed)
	report["rps"] = float64(report["completed"].(int)) / *seconds
	out, _ := json.Marshal(report)
	fmt.Println(string(out))
}

func span(text string) (int64, int64, error) {
	lo, hi, found := strings.Cut(text, ":")
	a, errA := strconv.ParseInt(lo, 10, 64)
	b, errB := strconv.ParseInt(hi, 10, 64)
	if !found || errA != nil || errB != nil || b <= a {
		return 0, 0, fmt.Errorf("-positions must be LO:HI with LO < HI, got %q", text)
	}
	return a, b, nil
}

// load is one run: who is asked what, and when it is measured.
type load struct {
	client             *posenc.Client
	table              string
	lo, hi             int64
	rate               float64
	start, from, until time.Time
}

// drive runs the workers until the measured window has passed: the latencies of the requests sent
// (closed loop) or due (open loop) inside it. Open loop, one pacer hands each request to the next free
// worker at its due time; when every worker is busy it waits, and the wait counts.
func (l *load) drive(workers int, seed int64) map[string]any {
	var due chan time.Time
	if l.rate > 0 {
		due = make(chan time.Time, workers)
		go l.pace(due)
	}
	results := make([]tally, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			results[w] = l.worker(rand.New(rand.NewSource(seed*1_000_003+int64(w))), due)
		}(w)
	}
	wg.Wait()
	var all []time.Duration
	completed, failed := 0, 0
	for _, r := range results {
		all = append(all, r.latencies...)
		completed += r.completed
		failed += r.failed
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return map[string]any{"completed": completed, "errors": failed, "p50_us": percentile(all, 50),
		"p99_us": percentile(all, 99), "p999_us": percentile(all, 99.9), "max_us": percentile(all, 100)}
}

// tally is one worker's count: the latencies of the requests sent (closed loop) or due (open loop) in
// the measured window, the replies that arrived in it, and the calls that failed.
type tally struct {
	latencies         []time.Duration
	completed, failed int
}

// pace sends request k's due time, start + k/rate, when it has come, until the window ends.
func (l *load) pace(due chan<- time.Time) {
	for k := 0; ; k++ {
		at := l.start.Add(time.Duration(float64(k) / l.rate * float64(time.Second)))
		if !at.Before(l.until) {
			close(due)
			return
		}
		if wait := time.Until(at); wait > 2*time.Millisecond {
			time.Sleep(wait - time.Millisecond)
		}
		for time.Now().Before(at) {
			runtime.Gosched()
		}
		due <- at
	}
}

// worker calls the client: closed loop, at once after each reply; open loop, for each due time.
func (l *load) worker(rng *rand.Rand, due <-chan time.Time) tally {
	var t tally
	ctx := context.Background()
	time.Sleep(time.Until(l.start))
	for {
		at := time.Now()
		if due != nil {
			var open bool
			if at, open = <-due; !open {
				return t
			}
		} else if !at.Before(l.until) {
			return t
		}
		position := l.lo + rng.Int63n(l.hi-l.lo)
		_, err := l.client.Encode(ctx, l.table, posenc.Int64s{position}, posenc.Float32)
		done := time.Now()
		if err != nil && !at.Before(l.from) {
			t.failed++
		}
		if err == nil && !done.Before(l.from) && done.Before(l.until) {
			t.completed++
		}
		if err == nil && !at.Before(l.from) {
			t.latencies = append(t.latencies, done.Sub(at))
		}
	}
}

// percentile of sorted latencies in microseconds: the smallest latency with at least p % of them at
// or below it.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(p/100*float64(len(sorted))+0.999999) - 1
	if k < 0 {
		k = 0
	}
	if k >= len(sorted) {
		k = len(sorted) - 1
	}
	return float64(sorted[k]) / 1e3
}
