package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// recorder is a shell command for `lock run` that appends "start TOKEN" and
// "end TOKEN" to file around a short sleep. Appends of one short line are
// atomic, so the file is the order in which the commands really started and
// ended: with the lock working it alternates start/end of one token.
func recorder(file string) []string {
	return []string{"sh", "-c", `echo "start $LOANQ_LOCK_TOKEN $LOANQ_LOCK_NAME" >> ` + file +
		`; sleep 0.2; echo "end $LOANQ_LOCK_TOKEN $LOANQ_LOCK_NAME" >> ` + file}
}

// checkNoOverlap reads a recorder file: every start is followed by the end
// of the same token before the next start. It returns the tokens in order.
func checkNoOverlap(t *testing.T, file string) []int64 {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines)%2 != 0 {
		t.Fatalf("odd number of start/end lines:\n%s", data)
	}
	var tokens []int64
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(s) != 3 || len(e) != 3 || s[0] != "start" || e[0] != "end" || s[1] != e[1] {
			t.Fatalf("two commands ran at once under one lock (lines %d-%d):\n%s", i+1, i+2, data)
		}
		tok, err := strconv.ParseInt(s[1], 10, 64)
		if err != nil {
			t.Fatalf("LOANQ_LOCK_TOKEN %q is not a number", s[1])
		}
		if len(tokens) > 0 && tok <= tokens[len(tokens)-1] {
			t.Fatalf("fencing token did not grow: %d after %d\n%s", tok, tokens[len(tokens)-1], data)
		}
		tokens = append(tokens, tok)
	}
	return tokens
}

// lockRows renders loanq_lock, by name: equal renderings mean nothing changed.
func lockRows(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT name, holder, token FROM loanq_lock ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var name string
		var holder sql.NullString
		var token int64
		if err := rows.Scan(&name, &holder, &token); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %v %d\n", name, holder, token)
	}
	return b.String()
}

type lockJSON struct {
	Locks []struct {
		Name      string  `json:"name"`
		Holder    *string `json:"holder"`
		State     string  `json:"state"`
		Token     int64   `json:"token"`
		TakenAt   *string `json:"taken_at"`
		ExpiresAt *string `json:"expires_at"`
	} `json:"locks"`
}

func lockList(t *testing.T, dsn string) lockJSON {
	t.Helper()
	r := mustOK(t, dsn, "admin", "--output", "json", "lock", "list")
	var l lockJSON
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("lock list JSON: %v\n%s", err, r.stdout)
	}
	return l
}

// N OS processes race for one lock name: never two commands at once, the
// losers exit 75 (without --wait) or run one after the other (with --wait),
// every take has a larger token, and the lock is free at the end.
func TestLockRunProcessesNeverOverlap(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "admin", "migrate", "up")
		dir := t.TempDir()
		const procs = 8
		race := func(file string, extra ...string) []result {
			var wg sync.WaitGroup
			res := make([]result, procs)
			for i := 0; i < procs; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					args := append(append([]string{"lock", "run", "nightly", "--ttl", "5s"}, extra...), "--")
					res[i] = loanq(t, dsn, "admin", append(args, recorder(file)...)...)
				}(i)
			}
			wg.Wait()
			return res
		}

		// No --wait: whoever finds the lock held exits 75 at once.
		file := filepath.Join(dir, "nowait")
		ran := 0
		for i, r := range race(file) {
			switch r.code {
			case 0:
				ran++
			case 75:
				if !strings.Contains(r.stderr, "lock nightly is held") {
					t.Errorf("process %d: exit 75 without saying who holds the lock:\n%s", i, r.stderr)
				}
			default:
				t.Fatalf("process %d: exit %d\n%s", i, r.code, r.stderr)
			}
		}
		if tokens := checkNoOverlap(t, file); len(tokens) != ran || ran == 0 {
			t.Fatalf("%d processes exited 0 but %d commands ran", ran, len(tokens))
		}

		// --wait: all of them run, one at a time.
		file = filepath.Join(dir, "wait")
		for i, r := range race(file, "--wait", "2m") {
			if r.code != 0 {
				t.Fatalf("process %d with --wait: exit %d\n%s", i, r.code, r.stderr)
			}
		}
		if tokens := checkNoOverlap(t, file); len(tokens) != procs {
			t.Fatalf("%d commands ran with --wait, want %d", len(tokens), procs)
		}

		l := lockList(t, dsn)
		if len(l.Locks) != 1 || l.Locks[0].Name != "nightly" || l.Locks[0].State != "free" || l.Locks[0].Holder != nil ||
			l.Locks[0].Token != int64(ran+procs) || l.Locks[0].TakenAt == nil || l.Locks[0].ExpiresAt != nil {
			t.Fatalf("lock list after the races: %+v (want nightly, free, token %d)", l.Locks, ran+procs)
		}
		if _, err := time.Parse(time.RFC3339, *l.Locks[0].TakenAt); err != nil || !strings.HasSuffix(*l.Locks[0].TakenAt, "Z") {
			t.Fatalf("taken_at %q is not RFC 3339 UTC", *l.Locks[0].TakenAt)
		}
	})
}

// The command's exit status is passed on; the lock's environment is set;
// SIGTERM to loanq reaches the command and the lease is released after it.
func TestLockRunPassesStatusAndSignals(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "admin", "migrate", "up")
		r := loanq(t, dsn, "admin", "lock", "run", "st", "--", "sh", "-c", `echo "$LOANQ_LOCK_NAME $LOANQ_LOCK_TOKEN"; exit 3`)
		if r.code != 3 || strings.TrimSpace(r.stdout) != "st 1" || r.stderr != "" {
			t.Fatalf("lock run of a command exiting 3: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}

		dir := t.TempDir()
		started := filepath.Join(dir, "started")
		p := startProc(t, dsn, "admin", 2*time.Minute, "lock", "run", "st", "--ttl", "30s", "--", "sh", "-c",
			`trap 'echo term >> `+started+`; exit 7' TERM; echo up > `+started+`; while :; do sleep 0.05; done`)
		waitForFile(t, started, p)
		if l := lockList(t, dsn); l.Locks[0].State != "held" || l.Locks[0].Holder == nil || !strings.Contains(*l.Locks[0].Holder, ":") {
			t.Fatalf("lock list while the command runs: %+v", l.Locks[0])
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r = p.wait()
		if r.code != 7 {
			t.Fatalf("SIGTERM to lock run: exit %d, want the command's 7\n%s", r.code, r.stderr)
		}
		if data, _ := os.ReadFile(started); !strings.Contains(string(data), "term") {
			t.Fatalf("the command did not get SIGTERM: %q", data)
		}
		if l := lockList(t, dsn); l.Locks[0].State != "free" || l.Locks[0].Token != 2 {
			t.Fatalf("lock after the signalled run: %+v, want free with token 2", l.Locks[0])
		}
	})
}

// A holder killed with SIGKILL cannot release: the next taker gets the lock
// once the TTL has passed (by the database clock), with a larger token.
func TestLockRunTakesOverAKilledHolder(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "admin", "migrate", "up")
		started := filepath.Join(t.TempDir(), "started")
		a := startProc(t, dsn, "admin", 2*time.Minute, "lock", "run", "k", "--ttl", "2s", "--", "sh", "-c",
			`echo $LOANQ_LOCK_TOKEN > `+started+`; exec sleep 60`)
		waitForFile(t, started, a)
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// The command (sleep, exec'd by the shell) gets SIGTERM when its loanq
		// dies, so it ends and closes the output pipes: wait returns at once.
		a.wait()
		if l := lockList(t, dsn); l.Locks[0].Holder == nil || l.Locks[0].Token != 1 {
			t.Fatalf("after SIGKILL the dead holder still holds the row: %+v", l.Locks[0])
		}
		r := loanq(t, dsn, "admin", "lock", "run", "k", "--ttl", "2s", "--wait", "1m", "--", "sh", "-c", `echo $LOANQ_LOCK_TOKEN`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
			t.Fatalf("take-over: exit %d, stdout %q (want token 2)\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

// A holder whose renewals fail stops its command: the test moves the lease
// to another holder with a new token in the database, as a taker after
// expiry would; the next renewal finds another token, the command gets
// SIGTERM and loanq exits 1 saying the lease was lost, releasing nothing.
func TestLockRunStopsCommandWhenLeaseLost(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "admin", "migrate", "up")
		d, db := testdb.Open(t, dsn)
		dir := t.TempDir()
		started, ended := filepath.Join(dir, "started"), filepath.Join(dir, "ended")
		p := startProc(t, dsn, "admin", 2*time.Minute, "lock", "run", "lost", "--ttl", "1s", "--", "sh", "-c",
			`echo up > `+started+`; sleep 60; echo done > `+ended)
		waitForFile(t, started, p)
		// The database takes a lock only once it has expired (migration
		// 00017): the lease runs out first, then the thief takes it.
		for _, q := range []string{
			"UPDATE loanq_lock SET expires_at = taken_at WHERE name = 'lost'",
			"UPDATE loanq_lock SET holder = 'thief:1', token = token + 1, expires_at = " + d.Dialect().NowPlusMillis("60000") + " WHERE name = 'lost'",
		} {
			if _, err := db.ExecContext(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		r := p.wait()
		if r.code != 1 || !strings.Contains(r.stderr, "lease lost") {
			t.Fatalf("lock run after its lease was taken: exit %d, want 1 saying the lease was lost\n%s", r.code, r.stderr)
		}
		if _, err := os.Stat(ended); err == nil {
			t.Fatal("the command ran to its end although the lease was lost")
		}
		if got := lockRows(t, db); got != "lost {thief:1 true} 2\n" {
			t.Fatalf("loanq_lock after the lost lease: %q (the new holder's lease must stay)", got)
		}
	})
}

// Bad input: exit 2, a message naming the problem, loanq_lock unchanged.
func TestLockRunBadInput(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "admin", "migrate", "up")
		_, db := testdb.Open(t, dsn)
		mustOK(t, dsn, "admin", "lock", "run", "existing", "--", "true")
		before := lockRows(t, db)
		cases := []badInput{
			{"no name", "a", []string{"lock", "run"}, 2, "lock name"},
			{"empty name", "a", []string{"lock", "run", "", "--", "true"}, 2, "lock name"},
			{"blank name", "a", []string{"lock", "run", "  ", "--", "true"}, 2, "lock name"},
			{"name with spaces around", "a", []string{"lock", "run", " x ", "--", "true"}, 2, "white space"},
			{"name with a control character", "a", []string{"lock", "run", "a\tb", "--", "true"}, 2, "control"},
			{"name too long", "a", []string{"lock", "run", strings.Repeat("n", 201), "--", "true"}, 2, "characters"},
			{"no command", "a", []string{"lock", "run", "x"}, 2, "no command"},
			{"no command after --", "a", []string{"lock", "run", "x", "--"}, 2, "no command"},
			{"unknown program", "a", []string{"lock", "run", "x", "--", "no-such-program-xyz"}, 2, "cannot run"},
			{"ttl not a duration", "a", []string{"lock", "run", "x", "--ttl", "5", "--", "true"}, 2, "--ttl"},
			{"ttl zero", "a", []string{"lock", "run", "x", "--ttl", "0s", "--", "true"}, 2, "--ttl"},
			{"ttl too short", "a", []string{"lock", "run", "x", "--ttl", "10ms", "--", "true"}, 2, "--ttl"},
			{"ttl too long", "a", []string{"lock", "run", "x", "--ttl", "48h", "--", "true"}, 2, "--ttl"},
			{"wait negative", "a", []string{"lock", "run", "x", "--wait", "-1s", "--", "true"}, 2, "--wait"},
			{"wait malformed", "a", []string{"lock", "run", "x", "--wait", "later", "--", "true"}, 2, "--wait"},
			{"list with an argument", "a", []string{"lock", "list", "x"}, 2, "argument"},
		}
		for _, c := range cases {
			check(t, c, loanq(t, dsn, c.user, c.args...))
		}
		if after := lockRows(t, db); after != before {
			t.Fatalf("bad input changed loanq_lock:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// waitForFile waits (generously) until the command under test has written
// file, failing if its loanq process ends first.
func waitForFile(t *testing.T, file string, p *proc) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(file); err == nil {
			return
		}
		if !p.running() {
			r := p.wait()
			t.Fatalf("loanq ended (exit %d) before its command started:\n%s", r.code, r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", file)
}
