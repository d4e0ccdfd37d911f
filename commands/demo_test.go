package commands_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loanq/loanq/commands"
	"github.com/loanq/loanq/internal/testkit/testdb" // also registers the drivers
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = commands.Main(append([]string{"loanq"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestDemoCommand drives `loanq demo seed` and `loanq demo` through the
// command line, text and JSON, on SQLite (the demo package's own tests cover
// the servers).
func TestDemoCommand(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")

	out, errs, code := run(t, "--db", dsn, "demo", "seed", "--loans", "50")
	if code != 0 || !strings.Contains(out, "created table loan with 50 sample loans") || !strings.Contains(out, "work get verify-bank") {
		t.Fatalf("demo seed: exit %d\n%s%s", code, out, errs)
	}

	out, errs, code = run(t, "--db", dsn, "demo", "--loans", "100", "--processors", "2", "--duration", "1s")
	if code != 0 || !strings.Contains(out, "reset: found earlier demo data") || !strings.Contains(out, "invariant  PASS") {
		t.Fatalf("demo: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out, "\r") {
		t.Errorf("progress line written to a non-terminal:\n%q", out)
	}

	out, errs, code = run(t, "--db", dsn, "--output", "json", "demo", "--loans", "100", "--processors", "2", "--duration", "1s")
	var s struct {
		Invariant   string `json:"invariant"`
		Passed      bool   `json:"passed"`
		Requests    int64  `json:"requests"`
		ByProcessor []struct {
			User string `json:"user"`
		} `json:"by_processor"`
		Setup struct {
			Reset bool `json:"reset"`
		} `json:"setup"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("demo --output json: exit %d, %v\n%s%s", code, err, out, errs)
	}
	if s.Invariant != "PASS" || !s.Passed || s.Requests == 0 || len(s.ByProcessor) != 2 || !s.Setup.Reset {
		t.Errorf("demo JSON summary: %+v", s)
	}

	if _, errs, code = run(t, "--db", dsn, "demo", "--processors", "0"); code != 2 || !strings.Contains(errs, "--processors") {
		t.Errorf("demo --processors 0: exit %d, %s", code, errs)
	}
}

func TestDemoHelp(t *testing.T) {
	for _, args := range [][]string{{"demo", "--help"}, {"demo", "seed", "--help"}} {
		out, _, code := run(t, args...)
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "loanq demo") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
}
