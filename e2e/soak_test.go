package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// TestSoak is off by default. It runs P loanq processes at a time for T
// minutes on each database (SQLite, PostgreSQL, MariaDB/MySQL, one after the
// other): each worker loops `work get` (1-3 loans, on one of two tasks: the
// dialect's default strategy, and the lease with a per-user cap) and
// dispositions every loan it got (complete, return --after 0s or 2s, never).
// Then every pending request is rechecked and the whole database audited.
// It reports requests done, loans assigned, dispositions, errors by kind and
// audit findings (which must all be 0).
//
//	LOANQ_SOAK=1 LOANQ_SOAK_MINUTES=2 scripts/test.sh -run TestSoak ./e2e/
//
// LOANQ_SOAK_PROCS sets P (default 6).
func TestSoak(t *testing.T) {
	if os.Getenv("LOANQ_SOAK") != "1" {
		t.Skip("the soak test runs only with LOANQ_SOAK=1 (see docs/reliability.md)")
	}
	minutes := envFloat(t, "LOANQ_SOAK_MINUTES", 2)
	procs := int(envFloat(t, "LOANQ_SOAK_PROCS", 6))
	seed := uint64(time.Now().UnixNano())
	t.Logf("soak: %d processes x %.1f minutes per database, seed %d", procs, minutes, seed)
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 2000)
		def := d.Capabilities().Strategies[0]
		mustOK(t, dsn, "admin", "task", "create", "soak", "--where", "eligible = 1", "--order", "priority",
			"--lock", string(def), "--query-delay", "50ms")
		mustOK(t, dsn, "admin", "task", "create", "soak-lease", "--where", "eligible = 1", "--order", "priority",
			"--lock", "lease", "--query-delay", "50ms", "--lease-ttl", "30s", "--max-active", "2")
		tasks := []string{"soak", "soak-lease"}

		var mu sync.Mutex
		st := soakStats{errors: map[string]int{}, statuses: map[string]int{}, dispositions: map[string]int{}}
		deadline := time.Now().Add(time.Duration(minutes * float64(time.Minute)))
		var wg sync.WaitGroup
		for w := 0; w < procs; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(w)))
				user := fmt.Sprintf("soak%d", w)
				for time.Now().Before(deadline) {
					task := tasks[rng.IntN(len(tasks))]
					r := loanq(t, dsn, user, "--output", "json", "work", "get", task, "--count", strconv.Itoa(1+rng.IntN(3)),
						"--backoff", "50ms,100ms,200ms", "--timeout", "2m")
					mu.Lock()
					st.requests++
					mu.Unlock()
					if r.code != 0 {
						mu.Lock()
						st.errors[fmt.Sprintf("work get exit %d: %s", r.code, failureKind(r.stderr))]++
						mu.Unlock()
						continue
					}
					req := decode(t, r)
					mu.Lock()
					st.statuses[req.Status]++
					st.loans += len(req.Loans)
					mu.Unlock()
					for _, loan := range req.Loans {
						args := []string{"disposition", task, strconv.FormatInt(loan, 10)}
						switch p := rng.IntN(20); {
						case p < 12:
							args = append(args, "complete")
						case p < 15:
							args = append(args, "return", "--after", "0s")
						case p < 19:
							args = append(args, "return", "--after", "2s")
						default:
							args = append(args, "never")
						}
						dr := loanq(t, dsn, user, args...)
						mu.Lock()
						if dr.code != 0 {
							st.errors[fmt.Sprintf("disposition exit %d: %s", dr.code, failureKind(dr.stderr))]++
						} else {
							st.dispositions[strings.Join(args[3:], " ")]++
						}
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()

		rechecked := 0
		for _, task := range tasks {
			id := taskID(t, e, task)
			rechecked += recheckAll(t, dsn, d, e, id)
			s := drivers.Lease
			if task == "soak" {
				s = def
			}
			lockFree(t, d, e, id, s)
		}
		findings, err := e.Admin().Audit(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var audit []string
		for _, f := range findings {
			audit = append(audit, fmt.Sprintf("%s=%d", f.Check, f.Count))
			if f.Count != 0 {
				t.Errorf("INVARIANT VIOLATED: %s = %d (%s)", f.Check, f.Count, f.Purpose)
			}
		}
		runs := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_query_run")
		work := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work")
		requests := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request")
		t.Logf("SOAK %s: %d processes x %.1f min (%s default strategy + lease): %d work get calls (%d requests in the database, %d left pending and rechecked), %d loans assigned (%d work rows), statuses %v, dispositions %v, %d criteria-query runs; errors %s; audit %s",
			d.Name(), procs, minutes, def, st.requests, requests, rechecked, st.loans, work, st.statuses, st.dispositions, runs, st.errorList(), strings.Join(audit, " "))
	})
}

type soakStats struct {
	requests     int
	loans        int
	statuses     map[string]int
	dispositions map[string]int
	errors       map[string]int
}

func (s soakStats) errorList() string {
	if len(s.errors) == 0 {
		return "none"
	}
	var out []string
	for k, n := range s.errors {
		out = append(out, fmt.Sprintf("%dx %q", n, k))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func envFloat(t *testing.T, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("%s=%q: give a positive number", name, v)
	}
	return f
}
