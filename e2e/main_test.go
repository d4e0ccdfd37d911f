// Package e2e runs the loanq binary as separate OS processes against real
// databases: the coordination under test must hold across processes, not
// only across goroutines of one process.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loanq-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "loanq")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building loanq:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished loanq process.
type result struct {
	code   int
	stdout string
	stderr string
}

// loanq runs the binary with --db dsn and the given user, and waits for it.
func loanq(t *testing.T, dsn, user string, args ...string) result {
	t.Helper()
	return loanqWithStdin(t, nil, dsn, user, args...)
}

// loanqStdin is loanq with stdin given.
func loanqStdin(t *testing.T, dsn, user, stdin string, args ...string) result {
	t.Helper()
	return loanqWithStdin(t, strings.NewReader(stdin), dsn, user, args...)
}

// loanqWithStdin runs loanq with stdin (nil: none), and fails the test if it
// printed a stack trace.
func loanqWithStdin(t *testing.T, stdin io.Reader, dsn, user string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := command(ctx, dsn, user, args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running loanq %v: %v", args, err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("loanq %v printed a stack trace:\n%s", args, r.stderr)
	}
	return r
}

func command(ctx context.Context, dsn, user string, args ...string) *exec.Cmd {
	full := append([]string{"--db", dsn, "--user", user}, args...)
	cmd := exec.CommandContext(ctx, binary, full...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Dir = os.TempDir()
	return cmd
}

// mustOK runs loanq and fails the test unless it exits 0.
func mustOK(t *testing.T, dsn, user string, args ...string) result {
	t.Helper()
	r := loanq(t, dsn, user, args...)
	if r.code != 0 {
		t.Fatalf("loanq %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// request is the JSON of work get / work status (docs/json.md).
type request struct {
	RequestID int64   `json:"request_id"`
	Task      string  `json:"task"`
	User      string  `json:"user"`
	Requested int     `json:"requested"`
	Assigned  int     `json:"assigned"`
	Status    string  `json:"status"`
	Loans     []int64 `json:"loans"`
}

func decode(t *testing.T, r result) request {
	t.Helper()
	var req request
	if err := json.Unmarshal([]byte(r.stdout), &req); err != nil {
		t.Fatalf("output is not the JSON of docs/json.md: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return req
}
