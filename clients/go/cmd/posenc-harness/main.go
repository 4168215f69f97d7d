// Command posenc-harness runs the shared client tests (tests/clients/README.md) with the Go client:
//
//	posenc-harness cases CASES_JSON ADDRESS SHM_DIR
//	posenc-harness scenario NAME ADDRESS SHM_DIR
//
// It prints JSON lines on stdout, one object a line; clients/go/run-cases and run-scenario build and
// run it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 4 && args[0] == "cases":
		if err := runCases(args[1], args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "posenc-harness:", err)
			os.Exit(2)
		}
	case len(args) == 4 && args[0] == "scenario":
		result, err := runScenario(args[1], args[2], args[3])
		if err != nil {
			result = map[string]any{"ok": false, "detail": err.Error()}
		}
		if result != nil {
			emit(result)
		}
		if err != nil {
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: posenc-harness cases CASES_JSON ADDRESS SHM_DIR\n"+
			"       posenc-harness scenario NAME ADDRESS SHM_DIR")
		os.Exit(2)
	}
}

var stdout sync.Mutex

// emit prints one JSON line (goroutines may emit at the same time).
func emit(line map[string]any) {
	out, err := json.Marshal(line)
	if err != nil {
		panic(err)
	}
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(out, '\n'))
}
