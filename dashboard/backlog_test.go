package dashboard

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The backlog in /metrics and the dashboard's JSON comes from the periodic
// count only (a refresh never counts it): absent before the first count,
// then the loans waiting per task with the count's age. A task whose count
// fails has no figure and its failure is logged once, not at every round,
// while the other tasks keep theirs.
func TestBacklogFigures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		src := seeded(t, dsn)
		ctx := context.Background()
		var mu sync.Mutex
		var logged []string
		src.Log = func(s string) { mu.Lock(); logged = append(logged, s); mu.Unlock() }
		d, db := src.Driver, src.DB
		testdb.Exec(t, d, db, "CREATE TABLE gone_loans (id INTEGER PRIMARY KEY, eligible INTEGER NOT NULL)")
		if _, _, err := src.Admin.CreateTask(ctx, dispatch.TaskSpec{Name: "gamma", Source: "gone_loans", Where: "eligible = 1", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
		testdb.Exec(t, d, db, "DROP TABLE gone_loans")

		metrics := func() string {
			t.Helper()
			// What /metrics serves (web/metrics.go): the collector in a
			// registry of its own.
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewCollector(src, false))
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != 200 {
				t.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
			}
			return rec.Body.String()
		}
		src.TTL = 0
		if m := metrics(); strings.Contains(m, "loanq_backlog_loans{") {
			t.Fatalf("a backlog before any count:\n%s", m)
		}
		src.CountBacklogs(ctx)
		src.CountBacklogs(ctx)
		m := metrics()
		// alpha: ana holds loans 2-5 (1 was completed twice and matches);
		// beta: ben holds 2 and 3. 40 loans, all matching.
		for _, want := range []string{`loanq_backlog_loans{task="alpha"} 36`, `loanq_backlog_loans{task="beta"} 38`} {
			if !strings.Contains(m, want) {
				t.Errorf("no %s in\n%s", want, grep(m, "backlog"))
			}
		}
		if !regexp.MustCompile(`(?m)^loanq_backlog_age_seconds\{task="alpha"\} \d`).MatchString(m) {
			t.Errorf("no backlog age for alpha in\n%s", grep(m, "backlog"))
		}
		if strings.Contains(m, `loanq_backlog_loans{task="gamma"}`) {
			t.Errorf("a backlog for gamma, whose source is gone:\n%s", grep(m, "backlog"))
		}
		snap, err := src.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range snap.Tasks {
			switch {
			case f.Name == "gamma" && f.BacklogLoans != nil:
				t.Errorf("gamma: backlog %d, want none", *f.BacklogLoans)
			case f.Name != "gamma" && (f.BacklogLoans == nil || f.BacklogAgeMS == nil || *f.BacklogAgeMS < 0):
				t.Errorf("%s: backlog %v age %v", f.Name, f.BacklogLoans, f.BacklogAgeMS)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(logged) != 1 || !strings.Contains(logged[0], "backlog of task gamma") {
			t.Errorf("two rounds with gamma failing logged %q, want one line about gamma", logged)
		}
	})
}

func grep(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
