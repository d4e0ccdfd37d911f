package main

import (
	"strings"
	"testing"
)

// A failed test's output is printed and the run fails; a passing test's is
// not; the slowest top-level tests are listed, slowest first, a test with
// parallel subtests (TestC) by the time from its start to its end, a
// parallel test (TestD) by what go test reports (its waits left out) or its
// longest subtest's.
func TestRun(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: quiet\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":2.5}`,
		`{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"p","Test":"TestC"}`,
		`{"Time":"2026-01-01T00:00:04Z","Action":"pass","Package":"p","Test":"TestC","Elapsed":0.01}`,
		`{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"p","Test":"TestD"}`,
		`{"Time":"2026-01-01T00:00:00Z","Action":"pause","Package":"p","Test":"TestD"}`,
		`{"Time":"2026-01-01T00:01:00Z","Action":"cont","Package":"p","Test":"TestD"}`,
		`{"Time":"2026-01-01T00:01:00Z","Action":"run","Package":"p","Test":"TestD/pg"}`,
		`{"Time":"2026-01-01T00:01:00Z","Action":"pause","Package":"p","Test":"TestD/pg"}`,
		`{"Time":"2026-01-01T00:02:00Z","Action":"cont","Package":"p","Test":"TestD/pg"}`,
		`{"Time":"2026-01-01T00:02:03Z","Action":"pass","Package":"p","Test":"TestD/pg","Elapsed":3}`,
		`{"Time":"2026-01-01T00:02:03Z","Action":"pass","Package":"p","Test":"TestD","Elapsed":0}`,
		`{"Action":"output","Package":"p","Test":"TestB/sqlite","Output":"    b_test.go:3: broke\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/sqlite","Elapsed":7}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (7.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":7.1}`,
		`{"Action":"output","Package":"p","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t9.9s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":9.9}`,
	}, "\n")
	var out strings.Builder
	if code := run(strings.NewReader(in), &out, &out, 15); code != 1 {
		t.Errorf("exit %d, want 1 for a failed test", code)
	}
	got := out.String()
	for _, want := range []string{"b_test.go:3: broke", "--- FAIL: TestB", "FAIL\tp\t9.9s", "the 4 slowest tests (of 4):\n     7.1s  fail  p TestB\n     4.0s  pass  p TestC\n     3.0s  pass  p TestD\n     2.5s  pass  p TestA\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") || strings.Contains(got, "=== RUN") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}

	// -only-slowest (the lines of a stream printed already): the list alone,
	// and the run still fails.
	var lines, slowest strings.Builder
	if code := run(strings.NewReader(in), &lines, &slowest, 2); code != 1 {
		t.Errorf("exit %d with the lines discarded, want 1", code)
	}
	if got := slowest.String(); got != "\nthe 2 slowest tests (of 4):\n     7.1s  fail  p TestB\n     4.0s  pass  p TestC\n" {
		t.Errorf("slowest alone: %q", got)
	}
	if !strings.Contains(lines.String(), "FAIL\tp\t9.9s") || strings.Contains(lines.String(), "slowest") {
		t.Errorf("package lines: %q", lines.String())
	}
}
