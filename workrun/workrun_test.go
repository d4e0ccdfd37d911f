package workrun_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/workrun"
)

// These tests run real commands (sh -c) through the supervisor. The queue
// is a stand-in for the engine that hands out the loans a test lists and
// records the dispositions: it tests nothing of the database (the engine's
// Get and Dispose are tested in dispatch/, work run as a whole in e2e/).

func key(n int) loankey.Key { return loankey.New(loankey.Integer, fmt.Sprint(n)) }

// queue answers Get with answer(call, n) (call counts from 0; nil: empty).
type queue struct {
	answer     func(call, n int) []loankey.Key
	disposeErr error
	getErr     error

	mu       sync.Mutex
	calls    int
	asked    []int
	disposed []disposal
}

type disposal struct {
	loan   loankey.Key
	action string
	after  time.Duration
}

func (q *queue) Get(ctx context.Context, n int) (int64, []loankey.Key, error) {
	q.mu.Lock()
	call := q.calls
	q.calls++
	q.asked = append(q.asked, n)
	q.mu.Unlock()
	if q.getErr != nil {
		return 0, nil, q.getErr
	}
	var loans []loankey.Key
	if q.answer != nil {
		loans = q.answer(call, n)
	}
	return int64(call + 1), loans, nil
}

func (q *queue) Dispose(_ context.Context, loan loankey.Key, action string, after time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.disposed = append(q.disposed, disposal{loan, action, after})
	return q.disposeErr
}

// loans hands out first..last, at most n at a time, then answers empty.
func loans(first, last int) func(call, n int) []loankey.Key {
	next := first
	var mu sync.Mutex
	return func(_, n int) []loankey.Key {
		mu.Lock()
		defer mu.Unlock()
		var out []loankey.Key
		for ; n > 0 && next <= last; n-- {
			out = append(out, key(next))
			next++
		}
		return out
	}
}

// observer records what the run reports. Its Started, CameBack and Done
// are called one at a time, by the contract; the lock is for the test's
// reads.
type observer struct {
	mu         sync.Mutex
	out        map[string]*bytes.Buffer // stdout and stderr of each loan's command
	results    []workrun.Result
	cameBack   []string
	maxRunning int
}

func (o *observer) Output(l workrun.Loan) (io.Writer, io.Writer, func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out == nil {
		o.out = map[string]*bytes.Buffer{}
	}
	b := &bytes.Buffer{}
	o.out[l.Key.String()] = b
	return b, b, nil
}

func (o *observer) Started(p workrun.Progress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.maxRunning = max(o.maxRunning, p.Running)
}

func (o *observer) CameBack(l workrun.Loan, times int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cameBack = append(o.cameBack, fmt.Sprintf("%s×%d", l.Key, times))
}

func (o *observer) Done(r workrun.Result, p workrun.Progress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = append(o.results, r)
}

func (o *observer) output(loan string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.out[loan]; b != nil {
		return b.String()
	}
	return ""
}

// opts runs script with sh -c for each loan; $1 is the loan id.
func opts(script string) workrun.Options {
	return workrun.Options{Task: "t", User: "robot", Path: "/bin/sh", Argv: []string{"sh", "-c", script, "sh", "{}"},
		Count: 1, Concurrency: 1, UntilEmpty: true, RetryAfter: time.Hour, KillAfter: 300 * time.Millisecond}
}

func run(t *testing.T, ctx context.Context, o workrun.Options, q *queue) (*observer, error) {
	t.Helper()
	obs := &observer{}
	err := workrun.New(o, q, obs).Run(ctx)
	return obs, err
}

// How a command's end becomes its loan's disposition, with real commands.
func TestExitStatus(t *testing.T) {
	cases := []struct {
		name, script string
		timeout      time.Duration
		status       int
		action       string
		after        time.Duration
		failure      bool
		why          string
	}{
		{"success", "exit 0", 0, 0, dispatch.Complete, 0, false, ""},
		{"retry later", "exit 75", 0, 75, dispatch.Return, time.Hour, false, ""},
		{"never", "exit 65", 0, 65, dispatch.Never, 0, false, ""},
		{"other status", "exit 3", 0, 3, dispatch.Return, time.Hour, true, ""},
		{"killed", "kill -KILL $$", 0, 137, dispatch.Return, time.Hour, true, "ended by signal 9"},
		{"terminated", "kill -TERM $$", 0, 143, dispatch.Return, time.Hour, true, "ended by signal 15"},
		{"not found", "exec /nonexistent/program", 0, 127, dispatch.Return, time.Hour, true, ""},
		{"loan timeout", "exec sleep 30", 200 * time.Millisecond, 143, dispatch.Return, time.Hour, true, "--loan-timeout 200ms passed"},
		// SIGTERM ignored (and inherited by sleep): SIGKILL KillAfter later.
		// The shell must have set its trap before the timeout's SIGTERM: a
		// second leaves it time on a loaded machine (200 ms did not once:
		// the shell died of the SIGTERM, 143).
		{"timeout, TERM ignored", "trap '' TERM; sleep 30", time.Second, 137, dispatch.Return, time.Hour, true, "--loan-timeout 1s passed"},
		// Exit 75 after the timeout is still a failure: the timeout decides.
		{"timeout, then exit 75", "trap 'exit 75' TERM; sleep 30 & wait", time.Second, 75, dispatch.Return, time.Hour, true, "--loan-timeout 1s passed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := opts(c.script)
			o.LoanTimeout = c.timeout
			q := &queue{answer: loans(1, 1)}
			start := time.Now()
			obs, err := run(t, context.Background(), o, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(obs.results) != 1 {
				t.Fatalf("%d results, want 1", len(obs.results))
			}
			r := obs.results[0]
			if r.ExitCode != c.status || r.Disposition != c.action || r.After != c.after || r.Failure != c.failure || r.Why != c.why || r.Interrupted {
				t.Fatalf("result %+v, want status %d, %s after %s, failure %v, why %q", r, c.status, c.action, c.after, c.failure, c.why)
			}
			if want := []disposal{{key(1), c.action, c.after}}; !slices.Equal(q.disposed, want) {
				t.Fatalf("disposed %v, want %v", q.disposed, want)
			}
			if r.Duration <= 0 || r.Duration > time.Since(start) {
				t.Fatalf("duration %s", r.Duration)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("took %s: the command was not stopped", took)
			}
		})
	}
}

func TestDisposition(t *testing.T) {
	cases := []struct {
		status      int
		why         string
		interrupted bool
		action      string
		after       time.Duration
		failure     bool
	}{
		{0, "", false, dispatch.Complete, 0, false},
		{75, "", false, dispatch.Return, time.Minute, false},
		{65, "", false, dispatch.Never, 0, false},
		{1, "", false, dispatch.Return, time.Minute, true},
		{127, "could not start: x", false, dispatch.Return, time.Minute, true},
		{0, "--loan-timeout 1s passed", false, dispatch.Return, time.Minute, true},
		{143, "", true, dispatch.Return, 0, false},
		{0, "", true, dispatch.Return, 0, false},
	}
	for _, c := range cases {
		action, after, failure := workrun.Disposition(c.status, c.why, c.interrupted, time.Minute)
		if action != c.action || after != c.after || failure != c.failure {
			t.Errorf("Disposition(%d, %q, %v) = %s, %s, %v; want %s, %s, %v", c.status, c.why, c.interrupted,
				action, after, failure, c.action, c.after, c.failure)
		}
	}
}

func TestArgs(t *testing.T) {
	got := workrun.Args([]string{"./{}.sh", "{}", "--id={}", "x"}, loankey.New(loankey.Text, "a b"))
	if want := []string{"./{}.sh", "a b", "--id=a b", "x"}; !slices.Equal(got, want) {
		t.Fatalf("Args: %q, want %q", got, want)
	}
}

// The command's environment: the caller's without loanq's secrets, plus the
// four documented LOANQ_* variables.
func TestEnviron(t *testing.T) {
	const dsn = "postgres://loanq:secret@db/loanq"
	o := workrun.Options{Task: "verify", User: "robot", DSN: dsn}
	l := workrun.Loan{Request: 42, Key: key(7)}
	own := []string{"LOANQ_TASK=verify", "LOANQ_LOAN_ID=7", "LOANQ_USER=robot", "LOANQ_REQUEST_ID=42"}
	cases := []struct {
		name      string
		base, add []string
	}{
		{"plain", []string{"PATH=/bin", "HOME=/h"}, []string{"PATH=/bin", "HOME=/h"}},
		{"loanq's variables", []string{"LOANQ_DB=" + dsn, "PATH=/bin", "LOANQ_SERVE_TOKEN=t", "LOANQ_LOG_FORMAT=json", "LOANQ_USER=alice"}, []string{"PATH=/bin"}},
		{"DATABASE_URL is loanq's", []string{"DATABASE_URL=" + dsn, "A=1"}, []string{"A=1"}},
		{"DATABASE_URL is another", []string{"DATABASE_URL=postgres://app/db", "A=1"}, []string{"DATABASE_URL=postgres://app/db", "A=1"}},
		{"not loanq's prefix", []string{"LOANQX=1", "MY_LOANQ_DB=x"}, []string{"LOANQX=1", "MY_LOANQ_DB=x"}},
	}
	for _, c := range cases {
		got := workrun.Environ(c.base, o, l)
		if want := append(slices.Clone(c.add), own...); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", c.name, got, want)
		}
	}
}

// What a real command sees: the process's environment goes through
// Environ, and {} in its arguments is the loan id.
func TestCommandEnvironment(t *testing.T) {
	const dsn = "sqlite:/tmp/x.db"
	t.Setenv("LOANQ_DB", dsn)
	t.Setenv("LOANQ_SERVE_TOKEN", "s3cret")
	t.Setenv("DATABASE_URL", dsn)
	t.Setenv("KEEP_ME", "yes")
	o := opts(`echo "arg=$1"; env | grep -E '^(LOANQ_|DATABASE_URL=|KEEP_ME=)' | sort`)
	o.DSN = dsn
	q := &queue{answer: loans(7, 7)}
	obs, err := run(t, context.Background(), o, q)
	if err != nil {
		t.Fatal(err)
	}
	want := "arg=7\nKEEP_ME=yes\nLOANQ_LOAN_ID=7\nLOANQ_REQUEST_ID=1\nLOANQ_TASK=t\nLOANQ_USER=robot\n"
	if got := obs.output("7"); got != want {
		t.Fatalf("the command saw:\n%s\nwant:\n%s", got, want)
	}
}

// A loan the command completed that comes straight back: the observer is
// told once; MaxRepeats stops the run once it came back that many times in
// a row (that last time still processed); an empty answer ends a streak.
func TestRepeats(t *testing.T) {
	always7 := func(call, n int) []loankey.Key { return []loankey.Key{key(7)} }
	cases := []struct {
		name       string
		answer     func(call, n int) []loankey.Key
		script     string
		maxRepeats int
		maxLoans   int
		processed  int
		cameBack   []string
		stop       *workrun.RepeatsError
	}{
		{"stops at 2", always7, "exit 0", 2, 0, 3, []string{"7×1"}, &workrun.RepeatsError{Loan: key(7), Times: 2, Max: 2}},
		{"stops at 1", always7, "exit 0", 1, 0, 2, []string{"7×1"}, &workrun.RepeatsError{Loan: key(7), Times: 1, Max: 1}},
		{"no limit", always7, "exit 0", 0, 5, 5, []string{"7×1"}, nil},
		{"not completed", always7, "exit 75", 1, 4, 4, nil, nil},
		{"empty in between", func(call, n int) []loankey.Key {
			if call%2 == 1 {
				return nil
			}
			return []loankey.Key{key(7)}
		}, "exit 0", 1, 4, 4, nil, nil},
		{"other loans in between", loans(1, 5), "exit 0", 1, 0, 5, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := opts(c.script)
			o.MaxRepeats, o.MaxLoans, o.UntilEmpty, o.Idle = c.maxRepeats, c.maxLoans, c.maxLoans == 0, time.Millisecond
			obs, err := run(t, context.Background(), o, &queue{answer: c.answer})
			var stop *workrun.RepeatsError
			switch {
			case c.stop == nil && err != nil:
				t.Fatal(err)
			case c.stop != nil && (!errors.As(err, &stop) || *stop != *c.stop):
				t.Fatalf("error %v, want %+v", err, c.stop)
			}
			if len(obs.results) != c.processed || !slices.Equal(obs.cameBack, c.cameBack) {
				t.Fatalf("%d processed, came back %q; want %d, %q", len(obs.results), obs.cameBack, c.processed, c.cameBack)
			}
		})
	}
}

// MaxFailures stops the run: no new loan once it is reached.
func TestMaxFailures(t *testing.T) {
	o := opts("exit 1")
	o.MaxFailures = 2
	q := &queue{answer: loans(1, 10)}
	obs, err := run(t, context.Background(), o, q)
	var mf *workrun.MaxFailuresError
	if !errors.As(err, &mf) || *mf != (workrun.MaxFailuresError{Failures: 2, Max: 2}) {
		t.Fatalf("error %v, want 2 failures of 2", err)
	}
	if len(obs.results) != 2 || len(q.disposed) != 2 {
		t.Fatalf("%d processed, %d disposed; want 2", len(obs.results), len(q.disposed))
	}
}

// Concurrency commands run at once; each ask is for at most the free slots
// (and Count); MaxLoans bounds the loans taken.
func TestConcurrency(t *testing.T) {
	o := opts("sleep 0.5")
	o.Concurrency, o.Count, o.MaxLoans = 3, 2, 5
	q := &queue{answer: loans(1, 100)}
	start := time.Now()
	obs, err := run(t, context.Background(), o, q)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if len(obs.results) != 5 || obs.maxRunning != 3 {
		t.Fatalf("%d processed, at most %d running; want 5, 3", len(obs.results), obs.maxRunning)
	}
	if took > 3*time.Second {
		t.Fatalf("5 loans of 0.5s, 3 at a time, took %s", took)
	}
	taken := 0
	for _, n := range q.asked {
		if n < 1 || n > 2 {
			t.Fatalf("asked for %v", q.asked)
		}
		taken += n
	}
	if taken != 5 {
		t.Fatalf("asked for %v: %d loans, want 5", q.asked, taken)
	}
}

// The stop (the caller's context ends): no new loan; a command that ends
// within Grace is disposed of by its status; one that does not gets SIGTERM
// and its loan goes back at once, unfinished, not a failure. Run returns nil.
func TestStop(t *testing.T) {
	cases := []struct {
		name, script string
		status       int
		action       string
		interrupted  bool
	}{
		{"ends within the grace", "sleep 0.5; exit 0", 0, dispatch.Complete, false},
		{"stopped after the grace", "exec sleep 30", 143, dispatch.Return, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := opts(c.script)
			o.Grace, o.UntilEmpty = 700*time.Millisecond, false
			q := &queue{answer: loans(1, 100)}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			start := time.Now()
			obs, err := run(t, ctx, o, q)
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			if len(obs.results) != 1 {
				t.Fatalf("%d processed, want 1", len(obs.results))
			}
			r := obs.results[0]
			if r.ExitCode != c.status || r.Disposition != c.action || r.Interrupted != c.interrupted || r.Failure || r.After != 0 {
				t.Fatalf("result %+v", r)
			}
			if len(q.disposed) != 1 || q.disposed[0].after != 0 {
				t.Fatalf("disposed %v", q.disposed)
			}
		})
	}
}

// A failed disposition is reported with its result and ends the run with
// its error; a failed ask ends it at once.
func TestQueueErrors(t *testing.T) {
	bad := errors.New("connection lost")
	q := &queue{answer: loans(1, 1), disposeErr: bad}
	obs, err := run(t, context.Background(), opts("exit 0"), q)
	if !errors.Is(err, bad) || len(obs.results) != 1 || !errors.Is(obs.results[0].Err, bad) {
		t.Fatalf("dispose error: run %v, results %+v", err, obs.results)
	}
	q = &queue{getErr: bad}
	if _, err := run(t, context.Background(), opts("exit 0"), q); !errors.Is(err, bad) {
		t.Fatalf("get error: run %v", err)
	}
}
