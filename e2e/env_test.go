package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// docs/commands.md, "Command reference": every global option is also an environment
// variable, and a `work get` that finds no loan is done (exit 0, status
// empty), not a failure.
func TestEnvironmentAndEmptyAnswer(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		prepare(t, dsn, 5)
		mustOK(t, dsn, "admin", "task", "create", "nothing", "--where", "eligible = 2")
		cmd := exec.Command(binary, "work", "get", "nothing", "--count", "2")
		cmd.Dir = t.TempDir() // no loanq.db here: the database must come from LOANQ_DB
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LOANQ_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "LOANQ_DB="+dsn, "LOANQ_USER=from-env", "LOANQ_OUTPUT=json")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("work get with nothing to hand out: exit %d, want 0\n%s", ee.ExitCode(), errb.String())
			}
			t.Fatal(err)
		}
		var req request
		if err := json.Unmarshal(out.Bytes(), &req); err != nil {
			t.Fatalf("LOANQ_OUTPUT=json did not give JSON: %v\n%s", err, out.String())
		}
		if req.Status != "empty" || req.Assigned != 0 || len(req.Loans) != 0 || req.User != "from-env" || req.Task != "nothing" || req.Requested != 2 {
			t.Fatalf("answer: %+v; want an empty request of user from-env (LOANQ_USER)", req)
		}
	})
}
