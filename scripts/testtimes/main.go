// Command testtimes reads `go test -json` on stdin and prints what a plain
// `go test` prints — one line per package, and the output of the tests that
// failed — then the slowest tests of the run. scripts/test.sh (`make test`)
// pipes the suite through it and keeps the JSON in a file, so every test's
// time stays on record:
//
//	go test -json ./... | tee timings.json | go run ./scripts/testtimes -top 15
//
// It exits 1 when a test or a package failed, so a pipeline with pipefail
// fails either way.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json (`go doc test2json`).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	pkg, test string
	elapsed   float64
	action    string
}

func main() {
	top := flag.Int("top", 15, "how many of the slowest tests to list")
	only := flag.Bool("only-slowest", false, "print only the slowest tests (for a stream whose lines were printed already)")
	flag.Parse()
	out := io.Writer(os.Stdout)
	lines := out
	if *only {
		lines = io.Discard
	}
	os.Exit(run(os.Stdin, lines, out, *top))
}

// run prints the package lines and failed tests' output to out, the slowest
// tests to slowest.
func run(in io.Reader, out, slowest io.Writer, top int) int {
	buffered := map[string][]string{} // package + test → its output, printed if it fails
	started := map[string]time.Time{} // package + test → its run event
	paused := map[string]bool{}       // package + test → it called t.Parallel
	longestChild := map[string]float64{}
	var results []result
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(out, string(line)) // not test2json (a build error printed as is)
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test != "" && e.Action == "run":
			started[key] = e.Time
		case e.Test != "" && e.Action == "pause":
			// A parallel test waits at t.Parallel for the serial tests of
			// its package, then (after its cont event) for a -parallel
			// slot, and its parallel subtests wait for slots too: its wall
			// time is mostly waiting. Its cost is what go test reports as
			// its Elapsed (which leaves the waits out), or its longest
			// subtest's.
			paused[key] = true
		case e.Test != "" && e.Action == "output":
			buffered[key] = append(buffered[key], e.Output)
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			if e.Action == "fail" {
				failed = true
				// A failed subtest's parent fails too and prints its own
				// output (its --- FAIL line): print each once, as they end.
				fmt.Fprint(out, strings.Join(buffered[key], ""))
			}
			delete(buffered, key)
			// A test's own Elapsed leaves out its parallel subtests (they
			// run after its function returns): the time from its run event
			// to its end is what it cost the suite.
			took := max(e.Elapsed, longestChild[key])
			if t0, ok := started[key]; ok && !paused[key] && !t0.IsZero() && !e.Time.IsZero() {
				took = max(took, e.Time.Sub(t0).Seconds())
			}
			if i := strings.LastIndex(e.Test, "/"); i > 0 {
				parent := e.Package + " " + e.Test[:i]
				longestChild[parent] = max(longestChild[parent], took)
			}
			results = append(results, result{e.Package, e.Test, took, e.Action})
		case e.Test == "" && e.Action == "output":
			// The package's own lines: "ok  pkg 1.2s", "FAIL pkg", a panic
			// outside a test. The bare PASS / FAIL summary is dropped, as
			// plain go test does without -v.
			if o := strings.TrimSpace(e.Output); o != "PASS" && o != "FAIL" && !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			failed = true
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(slowest, "testtimes: reading go test -json: %v\n", err)
		return 1
	}
	// Top-level tests only: a subtest's time is part of its parent's.
	var tops []result
	for _, r := range results {
		if !strings.Contains(r.test, "/") {
			tops = append(tops, r)
		}
	}
	sort.SliceStable(tops, func(i, j int) bool { return tops[i].elapsed > tops[j].elapsed })
	if n := min(top, len(tops)); n > 0 {
		fmt.Fprintf(slowest, "\nthe %d slowest tests (of %d):\n", n, len(tops))
		for _, r := range tops[:n] {
			fmt.Fprintf(slowest, "%8.1fs  %-4s  %s %s\n", r.elapsed, r.action, strings.TrimPrefix(r.pkg, "github.com/loanq/loanq/"), r.test)
		}
	}
	if failed {
		return 1
	}
	return 0
}
