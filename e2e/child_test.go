package e2e

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// treeScript is a command that starts a child of its own (the `sleep` a
// shell waits for, which a parent-death signal never reaches) and writes
// both pids into dir. With ignoreTERM it ignores SIGTERM, and so does its
// child (an ignored signal stays ignored across fork and exec). Its output
// goes to /dev/null, so a survivor holds no pipe of the test's open.
func treeScript(dir string, ignoreTERM bool) string {
	s := `exec >/dev/null 2>&1; sleep 300 & echo $! > ` + dir + `/kid; echo $$ > ` + dir + `/sh; wait`
	if ignoreTERM {
		s = `trap "" TERM; ` + s
	}
	return s
}

// treePids waits until treeScript has written its pids and returns them.
func treePids(t *testing.T, dir string, p *proc) []int {
	t.Helper()
	var pids []int
	for _, f := range []string{"sh", "kid"} {
		file := filepath.Join(dir, f)
		waitForFile(t, file, p)
		var pid int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(file)
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pid = n
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds no pid", file)
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// processAlive reports whether pid runs; a zombie (dead, not yet reaped by
// whoever adopted it) is gone.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// waitTreeGone fails the test unless every pid is gone within limit of the
// kill; it returns how long that took. Survivors are killed.
func waitTreeGone(t *testing.T, killed time.Time, limit time.Duration, pids []int) time.Duration {
	t.Helper()
	for {
		var running []int
		for _, p := range pids {
			if processAlive(p) {
				running = append(running, p)
			}
		}
		if len(running) == 0 {
			return time.Since(killed)
		}
		if time.Since(killed) > limit {
			for _, p := range running {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("the command's processes %v still run %s after loanq was killed with SIGKILL", running, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// aliveCheck is a shell command printing "alive PID" for each of pids that
// runs (zombies do not), then "checked".
func aliveCheck(pids []int) string {
	s := ""
	for _, p := range pids {
		s += fmt.Sprintf(`if [ -r /proc/%d/stat ] && ! grep -q ') Z' /proc/%d/stat; then echo "alive %d"; fi; `, p, p, p)
	}
	return s + "echo checked"
}

// `lock run` killed with SIGKILL: its command and the command's child end
// (here they ignore SIGTERM, so the guard's SIGKILL, --ttl/3 = 1s later,
// ends them), before the lease expires; the next `lock run` of the name
// takes the lock after the TTL and finds nothing of the old command
// running beside it.
func TestLockRunKilledStopsTheCommandTree(t *testing.T) {
	// No t.Parallel: it times the command tree's end (between 0.8 s and 2.5 s after the kill).
	testdb.EachSerial(t, func(t *testing.T, dsn string) { // serial: it times the tree's end
		mustOK(t, dsn, "admin", "migrate", "up")
		dir := t.TempDir()
		a := startProc(t, dsn, "admin", 2*time.Minute, "lock", "run", "single", "--ttl", "3s", "--", "sh", "-c", treeScript(dir, true))
		pids := treePids(t, dir, a)
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		a.wait()
		took := waitTreeGone(t, killed, 2500*time.Millisecond, pids)
		if took < 800*time.Millisecond {
			t.Fatalf("a command ignoring SIGTERM ended %s after loanq's death, before its SIGKILL (1s)", took)
		}
		r := loanq(t, dsn, "admin", "lock", "run", "single", "--ttl", "3s", "--wait", "1m", "--",
			"sh", "-c", `echo "token $LOANQ_LOCK_TOKEN"; `+aliveCheck(pids))
		if r.code != 0 || !strings.Contains(r.stdout, "token 2") || !strings.Contains(r.stdout, "checked") || strings.Contains(r.stdout, "alive") {
			t.Fatalf("second lock run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// `work run` killed with SIGKILL: the running command and its child get
// SIGTERM at once and end; the loan stays active with its holder, as after a
// crashed `work get`.
func TestWorkRunKilledStopsTheCommandTree(t *testing.T) {
	// No t.Parallel: it times the command tree's end (within 2 s of the kill).
	testdb.EachSerial(t, func(t *testing.T, dsn string) { // serial: it times the tree's end
		d, e := prepare(t, dsn, 3)
		mustOK(t, dsn, "admin", "task", "create", "kill", "--where", "eligible = 1", "--order", "priority")
		dir := t.TempDir()
		a := startProc(t, dsn, "robot", 2*time.Minute, "work", "run", "kill", "--", "sh", "-c", treeScript(dir, false))
		pids := treePids(t, dir, a)
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		a.wait()
		// SIGTERM at once: well before the guard's SIGKILL 5s later.
		if took := waitTreeGone(t, killed, 3*time.Second, pids); took > 2*time.Second {
			t.Fatalf("the command took %s to end after loanq's death", took)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL AND loan_id = '1'"); n != 1 {
			t.Fatalf("%d active assignments of loan 1 after the kill, want 1 (kept by its holder)", n)
		}
	})
}

// secretToken and secretDB are values loanq's environment holds that no
// command of lock run or work run may see.
const (
	secretToken = "serve-token-1a2b3c"
	secretDB    = "postgres://app:app-secret-4d5e@127.0.0.1:1/appdb"
)

// runEnv runs loanq with exactly env on top of the test's environment
// (without its LOANQ_* variables) and no --db flag.
func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// envOf parses `env` output into a map.
func envOf(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// The commands of `work run` and `lock run` get the caller's environment
// without loanq's variables: no LOANQ_DB (a DSN that may hold a password),
// no LOANQ_SERVE_TOKEN, no other LOANQ_* than their contract's, no
// DATABASE_URL when that is loanq's database, and no PGPASSWORD when loanq
// connects to PostgreSQL (pgx reads loanq's password from it when the DSN
// has none); a DATABASE_URL naming another database, a PGPASSWORD beside
// another database, and everything else, stay.
func TestCommandEnvironmentHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		prepare(t, dsn, 2)
		mustOK(t, dsn, "admin", "task", "create", "env", "--where", "eligible = 1", "--order", "priority")
		// The test server's own PGPASSWORD if it needs one, so that loanq
		// still connects; the test PostgreSQL trusts local connections.
		pgPassword := cmp.Or(os.Getenv("PGPASSWORD"), "pg-secret-6f7a8b")
		loanqsPG := strings.HasPrefix(dsn, "postgres")
		common := []string{"LOANQ_SERVE_TOKEN=" + secretToken, "LOANQ_OUTPUT=text", "LOANQ_USER=robot",
			"LOANQ_LOCK_TOKEN=999", "LOANQ_SOMETHING=x", "KEEP_ME=kept", "PGPASSWORD=" + pgPassword}
		check := func(what string, r result, want map[string]string, gone ...string) {
			t.Helper()
			if r.code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", what, r.code, r.stdout, r.stderr)
			}
			secrets := []string{secretToken, dsn}
			if loanqsPG {
				secrets = append(secrets, pgPassword)
			}
			for _, s := range secrets {
				if strings.Contains(r.stdout, s) {
					t.Errorf("%s: the command saw loanq's secret %q:\n%s", what, s, r.stdout)
				}
			}
			env := envOf(r.stdout)
			if pg, ok := env["PGPASSWORD"]; loanqsPG && ok || !loanqsPG && pg != pgPassword {
				t.Errorf("%s: PGPASSWORD=%q in the command's environment (present: %v); want it gone only when loanq's database is PostgreSQL", what, pg, ok)
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("%s: %s=%q in the command's environment, want %q", what, k, env[k], v)
				}
			}
			for _, k := range gone {
				if _, ok := env[k]; ok {
					t.Errorf("%s: %s is in the command's environment", what, k)
				}
			}
		}

		// LOANQ_DB is loanq's DSN; DATABASE_URL names another database.
		r := runEnv(t, append([]string{"LOANQ_DB=" + dsn, "DATABASE_URL=" + secretDB}, common...),
			"work", "run", "env", "--max-loans", "1", "--", "env")
		check("work run", r, map[string]string{"LOANQ_TASK": "env", "LOANQ_LOAN_ID": "1", "LOANQ_USER": "robot",
			"KEEP_ME": "kept", "DATABASE_URL": secretDB}, "LOANQ_DB", "LOANQ_SERVE_TOKEN", "LOANQ_OUTPUT", "LOANQ_LOCK_TOKEN", "LOANQ_SOMETHING")
		if _, ok := envOf(r.stdout)["LOANQ_REQUEST_ID"]; !ok {
			t.Errorf("work run: LOANQ_REQUEST_ID missing:\n%s", r.stdout)
		}
		r = runEnv(t, append([]string{"LOANQ_DB=" + dsn, "DATABASE_URL=" + secretDB}, common...),
			"lock", "run", "env", "--", "env")
		check("lock run", r, map[string]string{"LOANQ_LOCK_NAME": "env", "LOANQ_LOCK_TOKEN": "1", "KEEP_ME": "kept", "DATABASE_URL": secretDB},
			"LOANQ_DB", "LOANQ_SERVE_TOKEN", "LOANQ_OUTPUT", "LOANQ_USER", "LOANQ_TASK", "LOANQ_SOMETHING")

		// DATABASE_URL is loanq's DSN (no LOANQ_DB): it goes too.
		r = runEnv(t, append([]string{"DATABASE_URL=" + dsn}, common...), "work", "run", "env", "--max-loans", "1", "--", "env")
		check("work run with DATABASE_URL", r, map[string]string{"LOANQ_TASK": "env", "KEEP_ME": "kept"}, "DATABASE_URL", "LOANQ_DB")
		r = runEnv(t, append([]string{"DATABASE_URL=" + dsn}, common...), "lock", "run", "env", "--", "env")
		check("lock run with DATABASE_URL", r, map[string]string{"LOANQ_LOCK_TOKEN": "2", "KEEP_ME": "kept"}, "DATABASE_URL", "LOANQ_DB")
	})
}
