package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// keyTable is a source whose key is a text or UUID column, the way loan
// systems key applications: text keys like LN-2024-000123, and UUIDs in
// the database's native type where it has one (PostgreSQL's uuid,
// MariaDB's UUID; SQLite has none: a column declared UUID holds text).
type keyTable struct {
	name string
	kind loankey.Kind
	keys []string // in priority order (prio ascending)
}

// textKey is the i-th text key; two of them look like numbers, one with a
// leading zero, to show they stay distinct text.
func textKey(i int) string {
	switch i {
	case 1:
		return "007"
	case 2:
		return "7"
	}
	return fmt.Sprintf("LN-2024-%06d", 100+i)
}

func uuidKey(i int) string { return fmt.Sprintf("%08x-5c1d-4f2a-9e7b-%012x", 0xa0000000+i, i) }

func makeKeyTable(t *testing.T, f *fixture, kind loankey.Kind, n int) keyTable {
	t.Helper()
	kt := keyTable{name: "kt_text", kind: kind}
	col := "VARCHAR(40)"
	key := textKey
	if kind == loankey.UUID {
		kt.name, col, key = "kt_uuid", "UUID", uuidKey
	}
	testdb.Exec(t, f.d, f.db, "CREATE TABLE "+kt.name+" (ref "+col+" NOT NULL PRIMARY KEY, prio INTEGER NOT NULL, eligible INTEGER NOT NULL)")
	// The index a rows task needs (task create --lock rows checks it).
	testdb.Exec(t, f.d, f.db, "CREATE INDEX "+kt.name+"_ix ON "+kt.name+" (eligible, prio, ref)")
	for i := 1; i <= n; i++ {
		kt.keys = append(kt.keys, key(i))
		testdb.Exec(t, f.d, f.db, "INSERT INTO "+kt.name+" (ref, prio, eligible) VALUES (?, ?, 1)", key(i), i)
	}
	return kt
}

func (kt keyTable) spec(name string, lock drivers.Strategy) dispatch.TaskSpec {
	return dispatch.TaskSpec{Name: name, Source: kt.name, Key: "ref", Where: "eligible = 1", Order: "prio", Lock: lock, CreatedBy: "admin"}
}

var keyKinds = []loankey.Kind{loankey.Text, loankey.UUID}

// Many engines (separate pools, as separate nodes) and goroutines claim a
// text- or UUID-keyed task under every strategy the database has: every
// loan is handed out exactly once, in the task's order for the first, and
// the final state holds one active row per loan.
func TestKeysOfAnyTypeConcurrency(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 0)
		ctx := context.Background()
		const loans = 40
		for _, kind := range keyKinds {
			kt := makeKeyTable(t, f, kind, loans)
			for _, lock := range f.d.Capabilities().Strategies {
				name := fmt.Sprintf("%s-%s", kind, lock)
				task := f.task(t, kt.spec(name, lock))
				if task.KeyKind != kind {
					t.Fatalf("%s: key kind %s, want %s", name, task.KeyKind, kind)
				}
				// The first request: the task's order, keys as stored.
				r, err := f.e.Get(ctx, name, "first", 2, fast)
				if err != nil || fmt.Sprint(r.Loans) != fmt.Sprint(kt.keys[:2]) {
					t.Fatalf("%s: first get %v, %v; want %v", name, r, err, kt.keys[:2])
				}
				var mu sync.Mutex
				got := map[string]int{}
				// The engines first: a failure to connect ends the test
				// before any goroutine runs.
				engines := []*dispatch.Engine{f.engine(t), f.engine(t), f.engine(t)}
				var wg sync.WaitGroup
				for w, e := range engines {
					for g := 0; g < 4; g++ {
						wg.Add(1)
						go func(user string) {
							defer wg.Done()
							for {
								r, err := e.Get(ctx, name, user, 2, fast)
								if err != nil {
									t.Errorf("%s %s: %v", name, user, err)
									return
								}
								mu.Lock()
								for _, l := range r.Loans {
									got[l.String()]++
								}
								mu.Unlock()
								if len(r.Loans) == 0 {
									return
								}
							}
						}(fmt.Sprintf("u%d%d", w, g))
					}
				}
				wg.Wait()
				for k, n := range got {
					if n != 1 {
						t.Errorf("%s: loan %s handed out %d times", name, k, n)
					}
				}
				if len(got) != loans-2 {
					t.Errorf("%s: %d loans handed out beside the first 2, want %d", name, len(got), loans-2)
				}
				rows, dups := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", task.ID),
					f.count(t, "SELECT COUNT(*) - COUNT(DISTINCT loan_id) FROM loanq_work WHERE task_id = ? AND disposition IS NULL", task.ID)
				if rows != loans || dups != 0 {
					t.Errorf("%s: %d work rows (want %d), %d loans active twice", name, rows, loans, dups)
				}
				// Each stored key is one of the source's, as its text.
				if n := f.count(t, "SELECT COUNT(*) FROM loanq_work w WHERE w.task_id = ? AND NOT EXISTS (SELECT 1 FROM "+kt.name+" s WHERE "+
					f.d.Dialect().KeyAsText("s.ref")+" = w.loan_id)", task.ID); n != 0 {
					t.Errorf("%s: %d work rows whose loan_id is no source key", name, n)
				}
			}
		}
		f.audit(t)
	})
}

// The per-user cap, dispositions (complete, return, never), who may
// dispose, the key syntax per kind, and the JSON form: strings for text and
// UUID tasks, numbers for integer tasks.
func TestKeysOfAnyTypeCapAndDispositions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 5)
		ctx := context.Background()
		for _, kind := range keyKinds {
			kt := makeKeyTable(t, f, kind, 6)
			name := "cap-" + kind.String()
			spec := kt.spec(name, "")
			spec.MaxActive = 3
			f.task(t, spec)
			r, err := f.e.Get(ctx, name, "ann", 5, fast)
			if err != nil || r.Status != dispatch.StatusPartial || fmt.Sprint(r.Loans) != fmt.Sprint(kt.keys[:3]) {
				t.Fatalf("%s: capped get %+v, %v; want partial %v", name, r, err, kt.keys[:3])
			}
			b, _ := json.Marshal(r)
			if want := `"loans":["` + kt.keys[0] + `","` + kt.keys[1]; !strings.Contains(string(b), want) {
				t.Errorf("%s: JSON %s; want the keys as strings (%s…)", name, b, want)
			}
			if r, err := f.e.Get(ctx, name, "ann", 1, fast); err != nil || len(r.Loans) != 0 {
				t.Fatalf("%s: get at the cap: %+v, %v", name, r, err)
			}
			// Someone else's loan, a key of the wrong form, an unknown key.
			for _, bad := range []struct{ key, user, want string }{
				{kt.keys[0], "bob", "assigned to ann"},
				{kt.keys[5], "ann", "never been assigned"},
			} {
				if _, err := f.e.Dispose(ctx, name, bad.key, bad.user, dispatch.Complete, 0, false); problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("%s: dispose %s by %s: %v; want exit 2 saying %q", name, bad.key, bad.user, err, bad.want)
				}
			}
			if kind == loankey.UUID {
				if _, err := f.e.Dispose(ctx, name, "LN-1", "ann", dispatch.Complete, 0, false); problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), "UUID") {
					t.Errorf("%s: a key that is no UUID: %v; want exit 2 naming UUIDs", name, err)
				}
				// Upper case is the same UUID.
				if d, err := f.e.Dispose(ctx, name, strings.ToUpper(kt.keys[0]), "ann", dispatch.Complete, 0, false); err != nil || d.LoanID.String() != kt.keys[0] {
					t.Fatalf("%s: dispose in upper case: %+v, %v", name, d, err)
				}
			} else {
				if _, err := f.e.Dispose(ctx, name, strings.Repeat("x", loankey.MaxLength+1), "ann", dispatch.Complete, 0, false); problem.ExitCode(err) != problem.ExitUsage {
					t.Errorf("%s: a key over %d characters: %v; want exit 2", name, loankey.MaxLength, err)
				}
				d, err := f.e.Dispose(ctx, name, kt.keys[0], "ann", dispatch.Complete, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := json.Marshal(d); !strings.Contains(string(b), `"loan_id":"`+kt.keys[0]+`"`) {
					t.Errorf("%s: disposition JSON %s; want the key as a string", name, b)
				}
			}
			if _, err := f.e.Dispose(ctx, name, kt.keys[1], "ann", dispatch.Return, time.Hour, true); err != nil {
				t.Fatal(err)
			}
			if _, err := f.e.Dispose(ctx, name, kt.keys[2], "ann", dispatch.Never, 0, false); err != nil {
				t.Fatal(err)
			}
			// Complete and still matching: eligible again, first in order;
			// the returned (for an hour) and never ones are not.
			r, err = f.e.Get(ctx, name, "cy", 5, fast)
			want := []string{kt.keys[0], kt.keys[3], kt.keys[4]}
			if err != nil || fmt.Sprint(r.Loans) != fmt.Sprint(want) {
				t.Fatalf("%s: after dispositions %+v, %v; want %v", name, r, err, want)
			}
			items, err := f.e.Pipeline(ctx, "cy", name)
			if err != nil || len(items) != 3 {
				t.Fatalf("%s: pipeline %v, %v", name, items, err)
			}
			if b, _ := json.Marshal(items[0]); !strings.Contains(string(b), `"loan_id":"`+kt.keys[0]+`"`) {
				t.Errorf("%s: pipeline JSON %s; want the key as a string", name, b)
			}
		}
		// An integer task: keys stay JSON numbers, and "abc" is refused.
		f.task(t, dispatch.TaskSpec{Name: "ints"})
		if task, err := f.e.Task(ctx, "ints"); err != nil || task.KeyKind != loankey.Integer {
			t.Fatalf("integer task: %+v, %v", task, err)
		}
		r, err := f.e.Get(ctx, "ints", "ann", 2, fast)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(r); !strings.Contains(string(b), `"loans":[1,2]`) {
			t.Errorf("integer task JSON %s; want \"loans\":[1,2]", b)
		}
		if _, err := f.e.Dispose(ctx, "ints", "abc", "ann", dispatch.Complete, 0, false); problem.ExitCode(err) != problem.ExitUsage {
			t.Errorf("integer task, key abc: %v; want exit 2", err)
		}
		d, err := f.e.Dispose(ctx, "ints", "1", "ann", dispatch.Complete, 0, false)
		if b, _ := json.Marshal(d); err != nil || !strings.Contains(string(b), `"loan_id":1,`) {
			t.Errorf("integer disposition JSON %s, %v; want \"loan_id\":1", b, err)
		}
		f.audit(t)
	})
}

// A claimer killed mid-claim (its context ended just before its commit)
// leaves nothing behind on a text-keyed task, with and without a candidate
// pool: the next caller gets the same loans.
func TestKeysOfAnyTypeKilledClaim(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 0)
		ctx := context.Background()
		for _, kind := range keyKinds {
			kt := makeKeyTable(t, f, kind, 20)
			for _, prefetch := range []int{0, 8} {
				name := fmt.Sprintf("kill-%s-%d", kind, prefetch)
				spec := kt.spec(name, "")
				spec.Prefetch = prefetch
				task := f.task(t, spec)
				if _, err := f.e.Get(ctx, name, "ana", 1, fast); err != nil {
					t.Fatal(err)
				}
				victim := f.engine(t)
				cctx, cancel := context.WithCancel(ctx)
				victim.SetBeforeCommit(cancel)
				if _, err := victim.Get(cctx, name, "bob", 3, fast); err == nil || !errors.Is(err, context.Canceled) && cctx.Err() == nil {
					t.Fatalf("%s: the killed claim returned %v", name, err)
				}
				// The rollback of a cancelled transaction may finish a moment
				// after the call returned; its locks go with it.
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) && prefetch > 0 && poolSize(t, f, task) != prefetch {
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(100 * time.Millisecond)
				if _, err := f.e.Get(ctx, name, "carl", 3, fast); err != nil {
					t.Fatalf("%s: after the killed claim: %v", name, err)
				}
				// Nothing lost, nothing twice: the active loans are the
				// first ones in order, each once (bob's logged request may
				// have been served by carl's round, or rolled back with the
				// killed claim).
				rows, err := f.db.QueryContext(ctx, testdb.Rebind(f.d, "SELECT loan_id FROM loanq_work WHERE task_id = ? AND disposition IS NULL ORDER BY loan_id"), task.ID)
				if err != nil {
					t.Fatal(err)
				}
				active, err := drivers.ScanKeys(rows, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := append([]string{}, kt.keys[:len(active)]...)
				sort.Strings(want)
				if len(active) != 4 && len(active) != 7 || fmt.Sprint(active) != fmt.Sprint(want) {
					t.Fatalf("%s: active loans after the killed claim %v; want the first 4 or 7 in order, each once", name, active)
				}
			}
		}
		f.audit(t)
	})
}

// task create reads the key column's type: a float or date key is refused
// with exit 2 naming the supported types.
func TestKeyTypeRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 0)
		testdb.Exec(t, f.d, f.db, "CREATE TABLE kt_odd (f FLOAT NOT NULL, d DATE NOT NULL, eligible INTEGER NOT NULL)")
		for _, col := range []string{"f", "d"} {
			_, _, err := f.e.Admin().CreateTask(context.Background(), dispatch.TaskSpec{Name: "odd-" + col, Source: "kt_odd", Key: col,
				Where: "eligible = 1", CreatedBy: "admin"})
			if problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), "integer, text") || !strings.Contains(err.Error(), "UUID") {
				t.Errorf("key %s: %v; want exit 2 naming the supported types", col, err)
			}
		}
	})
}
