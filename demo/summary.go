package demo

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// Summary is the outcome of a demo run. Counts come from the database (the
// request log, the work rows and the criteria-query log), except busy answers
// and rechecks, which the database does not record.
type Summary struct {
	Setup      *Setup `json:"setup"`
	Processors int    `json:"processors"`
	DurationMS int64  `json:"duration_ms"`

	Requests         int64            `json:"requests"`
	RequestsByStatus map[string]int64 `json:"requests_by_status"`
	BusyAnswers      int64            `json:"busy_answers"`
	Rechecks         int64            `json:"rechecks"`
	// QueryRuns criteria queries served RequestsServed requests and assigned
	// LoansAssigned loans (loanq_query_run). Fewer runs than requests served
	// is coalescing: one run served requests that arrived while it ran.
	QueryRuns      int64 `json:"query_runs"`
	RequestsServed int64 `json:"requests_served"`
	LoansAssigned  int64 `json:"loans_assigned"`
	// Dispositions counts work rows by outcome: complete, return, never, and
	// active (still in a pipeline when the run ended).
	Dispositions map[string]int64 `json:"dispositions"`
	ByProcessor  []ProcessorStats `json:"by_processor"`
	ByTask       []TaskStats      `json:"by_task"`

	// Invariant is PASS when no audit of the database, during the run or at
	// its end, found a loan active twice in a task.
	Invariant       string             `json:"invariant"`
	AuditsDuringRun int                `json:"audits_during_run"`
	DuplicatesSeen  int64              `json:"duplicates_seen"`
	Audit           []dispatch.Finding `json:"audit"`
	AuditClean      bool               `json:"audit_clean"`
	Errors          []string           `json:"errors"`
	// Passed: invariant PASS, final audit clean and no processor errors.
	Passed bool `json:"passed"`
}

// ProcessorStats is one simulated processor's share.
type ProcessorStats struct {
	User          string `json:"user"`
	Requests      int64  `json:"requests"`
	BusyAnswers   int64  `json:"busy_answers"`
	Rechecks      int64  `json:"rechecks"`
	LoansAssigned int64  `json:"loans_assigned"`
	Complete      int64  `json:"complete"`
	Return        int64  `json:"return"`
	Never         int64  `json:"never"`
	Active        int64  `json:"active"`
	Errors        int    `json:"errors"`
}

// TaskStats is one demo task's traffic.
type TaskStats struct {
	Name           string `json:"name"`
	Lock           string `json:"lock"`
	QueryDelayMS   int64  `json:"query_delay_ms"`
	MaxActive      int    `json:"max_active"`
	Requests       int64  `json:"requests"`
	BusyAnswers    int64  `json:"busy_answers"`
	QueryRuns      int64  `json:"query_runs"`
	RequestsServed int64  `json:"requests_served"`
	LoansAssigned  int64  `json:"loans_assigned"`
}

// summarize reads the run's figures from the database once every processor
// has stopped, adds what the processors counted, and gives the verdict.
func summarize(ctx context.Context, eng *dispatch.Admin, d drivers.Driver, db *sql.DB, setup *Setup, procs []*processor, elapsed time.Duration,
	audits int, dupSeen int64, monErr error) (*Summary, error) {
	s := &Summary{Setup: setup, Processors: len(procs), DurationMS: elapsed.Milliseconds(),
		RequestsByStatus: map[string]int64{}, Dispositions: map[string]int64{"complete": 0, "return": 0, "never": 0, "active": 0},
		AuditsDuringRun: audits, DuplicatesSeen: dupSeen, Errors: []string{}}
	if monErr != nil {
		s.Errors = append(s.Errors, "audit during the run: "+monErr.Error())
	}
	t := newTally(s, setup, procs)
	if err := t.read(ctx, d, db); err != nil {
		return nil, err
	}
	s.ByProcessor = t.processors(procs)
	if err := s.judge(ctx, eng); err != nil {
		return nil, err
	}
	return s, nil
}

// tally fills a Summary's counts: per task from the database, per processor
// from the database and from what the processors themselves counted.
type tally struct {
	s *Summary
	// ids are the demo's own tasks: only they are counted, as the database
	// may hold others.
	ids   []int64
	byID  map[int64]*TaskStats
	users map[string]*ProcessorStats
}

// newTally sets up s.ByTask and takes the busy answers, rechecks and errors
// the processors counted (the database does not record them).
func newTally(s *Summary, setup *Setup, procs []*processor) *tally {
	t := &tally{s: s, byID: map[int64]*TaskStats{}, users: map[string]*ProcessorStats{}}
	s.ByTask = make([]TaskStats, len(setup.Tasks))
	for i, task := range setup.Tasks {
		t.ids = append(t.ids, task.id)
		s.ByTask[i] = TaskStats{Name: task.Name, Lock: task.Lock, QueryDelayMS: task.QueryDelayMS, MaxActive: task.MaxActive}
		t.byID[task.id] = &s.ByTask[i]
	}
	for _, p := range procs {
		ps := &ProcessorStats{User: p.user, Rechecks: p.rechecks, Errors: len(p.errors)}
		for task, n := range p.busy {
			ps.BusyAnswers += n
			for i := range s.ByTask {
				if s.ByTask[i].Name == task {
					s.ByTask[i].BusyAnswers += n
				}
			}
		}
		s.BusyAnswers += ps.BusyAnswers
		s.Rechecks += ps.Rechecks
		s.Errors = append(s.Errors, p.errors...)
		t.users[p.user] = ps
	}
	return t
}

// user is the line of a user, added when it is not one of this run's
// processors (someone working the demo's tasks by hand).
func (t *tally) user(name string) *ProcessorStats {
	if t.users[name] == nil {
		t.users[name] = &ProcessorStats{User: name}
	}
	return t.users[name]
}

// read adds what the database recorded: requests, assignments by outcome, and
// criteria-query runs.
func (t *tally) read(ctx context.Context, d drivers.Driver, db *sql.DB) error {
	st := dispatch.ReportSQL(d)
	if err := eachTask(ctx, db, t.ids, &st.RequestsByUser, t.addRequests); err != nil {
		return err
	}
	if err := eachTask(ctx, db, t.ids, &st.WorkByUser, t.addWork); err != nil {
		return err
	}
	return eachTask(ctx, db, t.ids, &st.QueryRunTotals, t.addRuns)
}

// eachTask runs one of the per-task report queries for every demo task.
func eachTask[R any](ctx context.Context, db *sql.DB, ids []int64, query *drivers.Query[engineio.TaskParams, R], add func(task int64, r R)) error {
	for _, id := range ids {
		if err := query.Each(ctx, db, engineio.TaskParams{TaskID: id}, func(r R) error {
			add(id, r)
			return nil
		}); err != nil {
			return fmt.Errorf("reading the demo's results: %w", err)
		}
	}
	return nil
}

// addRequests adds a row of RequestsByUser.
func (t *tally) addRequests(task int64, r dispatch.UserStatusCountRow) {
	n, name, status := r.N, r.User, r.Status
	t.s.Requests += n
	t.s.RequestsByStatus[status] += n
	t.byID[task].Requests += n
	t.user(name).Requests += n
}

// addWork adds a row of WorkByUser (a NULL disposition: active).
func (t *tally) addWork(_ int64, r dispatch.UserDispositionCountRow) {
	name, disp, n := r.User, r.Disposition, r.N
	ps := t.user(name)
	ps.LoansAssigned += n
	switch disp.String {
	case "":
		ps.Active += n
		t.s.Dispositions["active"] += n
	case dispatch.Complete:
		ps.Complete += n
	case dispatch.Return:
		ps.Return += n
	case dispatch.Never:
		ps.Never += n
	}
	if disp.Valid {
		t.s.Dispositions[disp.String] += n
	}
}

// addRuns adds the row of QueryRunTotals.
func (t *tally) addRuns(task int64, r dispatch.RunTotalsRow) {
	runs, served, assigned := r.Runs, r.Served, r.Assigned
	ts := t.byID[task]
	ts.QueryRuns, ts.RequestsServed, ts.LoansAssigned = runs, served, assigned
	t.s.QueryRuns += runs
	t.s.RequestsServed += served
	t.s.LoansAssigned += assigned
}

// processors lists the processors in their order, then any other user of the
// demo's tasks by name.
func (t *tally) processors(procs []*processor) []ProcessorStats {
	var out []ProcessorStats
	for _, p := range procs {
		out = append(out, *t.users[p.user])
		delete(t.users, p.user)
	}
	var extra []string
	for name := range t.users {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		out = append(out, *t.users[name])
	}
	return out
}

// judge gives the verdict, which is the database's: the audit read after
// every processor stopped, and the duplicates seen during the run.
func (s *Summary) judge(ctx context.Context, eng *dispatch.Admin) error {
	var err error
	s.Audit, err = eng.Audit(ctx)
	if err != nil {
		return err
	}
	s.AuditClean = true
	for _, f := range s.Audit {
		if f.Count != 0 {
			s.AuditClean = false
		}
	}
	s.Invariant = "PASS"
	if s.DuplicatesSeen > 0 || duplicates(s.Audit) > 0 {
		s.Invariant = "FAIL"
	}
	s.Passed = s.Invariant == "PASS" && s.AuditClean && len(s.Errors) == 0
	return nil
}

// WriteText prints the summary for people.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nSummary: %d processors for %.1fs on %s (%s)\n", s.Processors, float64(s.DurationMS)/1000, s.Setup.Dialect, s.Setup.Database)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  requests\t%d logged in loanq_work_request (%s)\n", s.Requests, statusText(s.RequestsByStatus))
	fmt.Fprintf(tw, "  busy answers\t%d: the task lock was held; each was rechecked (%d rechecks in all)\n", s.BusyAnswers, s.Rechecks)
	per := 0.0
	if s.QueryRuns > 0 {
		per = float64(s.RequestsServed) / float64(s.QueryRuns)
	}
	fmt.Fprintf(tw, "  criteria queries\t%d runs served %d requests: %.1f requests per run (coalescing)\n", s.QueryRuns, s.RequestsServed, per)
	fmt.Fprintf(tw, "  loans assigned\t%d\n", s.LoansAssigned)
	fmt.Fprintf(tw, "  dispositions\tcomplete %d, return %d, never %d; still active %d\n",
		s.Dispositions["complete"], s.Dispositions["return"], s.Dispositions["never"], s.Dispositions["active"])
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PROCESSOR\tREQUESTS\tBUSY\tLOANS\tCOMPLETE\tRETURN\tNEVER\tACTIVE")
	var tot ProcessorStats
	for _, p := range s.ByProcessor {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.User, p.Requests, p.BusyAnswers, p.LoansAssigned, p.Complete, p.Return, p.Never, p.Active)
		tot.Requests += p.Requests
		tot.BusyAnswers += p.BusyAnswers
		tot.LoansAssigned += p.LoansAssigned
		tot.Complete += p.Complete
		tot.Return += p.Return
		tot.Never += p.Never
		tot.Active += p.Active
	}
	fmt.Fprintf(tw, "  total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", tot.Requests, tot.BusyAnswers, tot.LoansAssigned, tot.Complete, tot.Return, tot.Never, tot.Active)
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TASK\tLOCK\tQUERY DELAY\tCAP\tREQUESTS\tBUSY\tQUERY RUNS\tLOANS")
	for _, t := range s.ByTask {
		cap := "-"
		if t.MaxActive > 0 {
			cap = fmt.Sprint(t.MaxActive)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%dms\t%s\t%d\t%d\t%d\t%d\n", t.Name, t.Lock, t.QueryDelayMS, cap, t.Requests, t.BusyAnswers, t.QueryRuns, t.LoansAssigned)
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintf(w, "  invariant  %s  no loan active twice in a task: %d duplicates in %d audits of the database during the run and 1 at the end\n",
		s.Invariant, s.DuplicatesSeen+duplicates(s.Audit), s.AuditsDuringRun)
	var bad []string
	for _, f := range s.Audit {
		if f.Count != 0 {
			bad = append(bad, fmt.Sprintf("%s %d (%s)", f.Check, f.Count, f.Purpose))
		}
	}
	if len(bad) == 0 {
		fmt.Fprintf(w, "  audit      clean: %d checks, all 0\n", len(s.Audit))
	} else {
		fmt.Fprintf(w, "  audit      NOT clean: %s\n", strings.Join(bad, "; "))
	}
	if len(s.Errors) > 0 {
		fmt.Fprintf(w, "  errors     %d:\n", len(s.Errors))
		for i, e := range s.Errors {
			if i == 5 {
				fmt.Fprintf(w, "    … and %d more\n", len(s.Errors)-5)
				break
			}
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
}

func statusText(m map[string]int64) string {
	var parts []string
	for _, st := range []string{dispatch.StatusAssigned, dispatch.StatusPartial, dispatch.StatusEmpty, dispatch.StatusPending} {
		if m[st] > 0 || st == dispatch.StatusAssigned {
			parts = append(parts, fmt.Sprintf("%s %d", st, m[st]))
		}
	}
	return strings.Join(parts, ", ")
}
