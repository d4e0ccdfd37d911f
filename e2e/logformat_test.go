package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// event is one line of --log-format json (log/slog's JSON handler).
type event map[string]any

// jsonEvents parses every line of stderr as one JSON object with time,
// level and msg, and fails the test on any other line.
func jsonEvents(t *testing.T, what, stderr string) []event {
	t.Helper()
	var out []event
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if line == "" && stderr == "" {
			break
		}
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: stderr line is not JSON (%v): %q\nstderr:\n%s", what, err, line, stderr)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := e[k]; !ok {
				t.Fatalf("%s: event without %q: %s", what, k, line)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, e["time"].(string)); err != nil {
			t.Fatalf("%s: time %v: %v", what, e["time"], err)
		}
		out = append(out, e)
	}
	return out
}

// find returns the events with msg, and fails unless there is at least one.
func find(t *testing.T, what string, evs []event, msg string) []event {
	t.Helper()
	var out []event
	for _, e := range evs {
		if e["msg"] == msg {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		b, _ := json.MarshalIndent(evs, "", " ")
		t.Fatalf("%s: no %q event in\n%s", what, msg, b)
	}
	return out
}

// --log-format json: every line serve, work run, lock run and task refill
// write to stderr is one JSON event (time, level, msg, fields), including
// the output of the commands they run and how they end (an error and the
// exit code); stdout keeps its format.
func TestLogFormatJSON(t *testing.T) {
	// No t.Parallel: task refill --every 1s must log a refill within the 2.5 s the test sleeps before its SIGINT.
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := prepare(t, dsn, 12)
		_, db := testdb.Open(t, dsn)
		mustOK(t, dsn, "admin", "task", "create", "logs", "--where", "eligible = 1", "--order", "priority")

		// work run: CMD writes to both streams; loan 1 is completed once
		// (and comes back: a warning), then never; the others are returned
		// for 1h.
		dir := t.TempDir()
		script := `echo out-$LOANQ_LOAN_ID; echo err-$LOANQ_LOAN_ID >&2; printf partial >&2; ` +
			`[ -e ` + dir + `/seen-$LOANQ_LOAN_ID ] && exit 65; touch ` + dir + `/seen-$LOANQ_LOAN_ID; [ $LOANQ_LOAN_ID = 1 ] || exit 75`
		r := loanq(t, dsn, "ana", "--output", "json", "work", "run", "logs", "--log-format", "json", "--max-loans", "6",
			"--concurrency", "1", "--retry-after", "1h", "--", "sh", "-c", script)
		if r.code != 0 {
			t.Fatalf("work run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		evs := jsonEvents(t, "work run", r.stderr)
		find(t, "work run", evs, "work run started")
		done := find(t, "work run", evs, "loan done")
		if len(done) != 6 {
			t.Fatalf("work run: %d loan done events, want 6", len(done))
		}
		for _, e := range done {
			if e["task"] != "logs" || e["user"] != "ana" || e["loan"] == nil || e["request"] == nil || e["exit"] == nil || e["disposition"] == nil {
				t.Fatalf("work run: loan done event without its fields: %v", e)
			}
		}
		lines := map[string]bool{}
		for _, e := range find(t, "work run", evs, "command output") {
			if e["loan"] == nil || e["task"] != "logs" {
				t.Fatalf("work run: command output without its loan: %v", e)
			}
			lines[e["stream"].(string)+" "+e["line"].(string)] = true
		}
		for _, want := range []string{"stdout out-1", "stderr err-1", "stderr partial"} {
			if !lines[want] {
				t.Errorf("work run: no command output %q in %v", want, lines)
			}
		}
		find(t, "work run", evs, "loan came back right after this runner completed it: it still matches the task's criteria; make the command change the data the criteria read, or exit 65 (never) or 75 (return)")
		if end := find(t, "work run", evs, "exit"); end[0]["exit"] != 0.0 {
			t.Errorf("work run: end %v, want exit 0", end[0])
		}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if !json.Valid([]byte(l)) {
				t.Errorf("work run --output json: stdout line not JSON: %q", l)
			}
		}

		// work run's refusal (an unknown task): the error as an event.
		r = loanq(t, dsn, "ana", "work", "run", "nosuch", "--log-format", "json", "--", "true")
		evs = jsonEvents(t, "work run nosuch", r.stderr)
		if r.code != 2 || len(evs) != 1 || evs[0]["level"] != "ERROR" || evs[0]["exit"] != 2.0 || !strings.Contains(evs[0]["msg"].(string), "nosuch") {
			t.Fatalf("work run nosuch: exit %d, events %v", r.code, evs)
		}

		// lock run: the lease taken and released, CMD's stderr, its status.
		r = loanq(t, dsn, "ana", "lock", "run", "nightly", "--log-format", "json", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3")
		if r.code != 3 || r.stdout != "to-stdout\n" {
			t.Fatalf("lock run: exit %d, stdout %q", r.code, r.stdout)
		}
		evs = jsonEvents(t, "lock run", r.stderr)
		find(t, "lock run", evs, "lock taken")
		find(t, "lock run", evs, "lock released")
		if out := find(t, "lock run", evs, "command output"); out[0]["line"] != "to-stderr" || out[0]["lock"] != "nightly" {
			t.Errorf("lock run: command output %v", out[0])
		}
		if end := find(t, "lock run", evs, "exit"); end[0]["exit"] != 3.0 {
			t.Errorf("lock run: end %v, want exit 3", end[0])
		}

		// task refill --every: a refill of a new task's empty pool, then
		// SIGINT (exit 130).
		mustOK(t, dsn, "admin", "task", "create", "pooled", "--where", "eligible = 1", "--order", "priority", "--prefetch", "4")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := command(ctx, dsn, "admin", "task", "refill", "--all", "--every", "1s", "--log-format", "json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		evs = jsonEvents(t, "task refill", stderr.String())
		if got := find(t, "task refill", evs, "refilled"); got[0]["task"] != "pooled" || got[0]["after"] != 4.0 {
			t.Errorf("task refill: %v", got[0])
		}
		if end := evs[len(evs)-1]; end["exit"] != 130.0 {
			t.Errorf("task refill after SIGINT: last event %v, want exit 130", end)
		}

		// serve: a backlog count that fails (the task's source is gone) is
		// logged as an error event; SIGINT ends it with an exit event.
		testdb.Exec(t, d, db, "CREATE TABLE gone_loans (id INTEGER PRIMARY KEY, eligible INTEGER NOT NULL)")
		mustOK(t, dsn, "admin", "task", "create", "gone", "--source", "gone_loans", "--where", "eligible = 1")
		testdb.Exec(t, d, db, "DROP TABLE gone_loans")
		s := startServe(t, dsn, "--log-format", "json", "--backlog-every", "1s")
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(s.stderr.String(), "backlog of task gone") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		s.stop(t)
		evs = jsonEvents(t, "serve", s.stderr.String())
		find(t, "serve", evs, "serving")
		find(t, "serve", evs, "exit")
		failed := false
		for _, e := range evs {
			if e["level"] == "ERROR" && strings.Contains(e["msg"].(string), "counting the backlog of task gone") {
				failed = true
			}
		}
		if !failed {
			t.Errorf("serve: no error event for the failed backlog count:\n%s", s.stderr.String())
		}
	})
}
