package dashboard

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector turns the cached snapshot into Prometheus metrics at scrape
// time. It holds no metric state of its own: every value is read from the
// Source's cache, so a scrape costs the database at most one refresh, shared
// with the dashboard's browsers.
type Collector struct {
	Source  *Source
	PerUser bool

	up, refreshSeconds, refreshQueries           *prometheus.Desc
	pending, oldestPending                       *prometheus.Desc
	active, oldestActive, overHold, activeByUser *prometheus.Desc
	eligible, dispositions, doneToday            *prometheus.Desc
	runDuration, served, assigned                *prometheus.Desc
	backlog, backlogAge                          *prometheus.Desc
}

// NewCollector describes loanq's metrics; units are in the names.
func NewCollector(s *Source, perUser bool) *Collector {
	task := []string{"task"}
	return &Collector{
		Source: s, PerUser: perUser,
		up: prometheus.NewDesc("loanq_database_up",
			"1 when the last refresh of the figures read the database, 0 when it failed.", nil, nil),
		refreshSeconds: prometheus.NewDesc("loanq_dashboard_refresh_duration_seconds",
			"How long the last refresh of the figures took, all its statements together.", nil, nil),
		refreshQueries: prometheus.NewDesc("loanq_dashboard_refresh_queries",
			"How many statements the last refresh of the figures sent.", nil, nil),
		pending: prometheus.NewDesc("loanq_pending_requests",
			"Work requests still pending, per task.", task, nil),
		oldestPending: prometheus.NewDesc("loanq_oldest_pending_request_age_seconds",
			"Age of the oldest pending work request, per task (0 when none).", task, nil),
		active: prometheus.NewDesc("loanq_active_work_loans",
			"Loans assigned and not yet dispositioned, per task.", task, nil),
		oldestActive: prometheus.NewDesc("loanq_oldest_active_work_age_seconds",
			"Age of the oldest active assignment, per task (0 when none).", task, nil),
		overHold: prometheus.NewDesc("loanq_active_work_over_hold_loans",
			"Active assignments held serve --stale-after or longer, per task (0 when --stale-after is off).", task, nil),
		activeByUser: prometheus.NewDesc("loanq_user_active_work_loans",
			"Loans assigned and not yet dispositioned, per task and user (--metrics-per-user).", []string{"task", "user"}, nil),
		eligible: prometheus.NewDesc("loanq_last_run_eligible_loans",
			"Eligible loans found by the task's latest criteria-query run (capped by the run's row limit).", task, nil),
		dispositions: prometheus.NewDesc("loanq_dispositions_total",
			"Assignments ended, per task and disposition, from the work history.", []string{"task", "disposition"}, nil),
		doneToday: prometheus.NewDesc("loanq_dispositions_today",
			"Assignments ended since midnight UTC of the database clock, per task and disposition.", []string{"task", "disposition"}, nil),
		runDuration: prometheus.NewDesc("loanq_criteria_run_duration_seconds",
			"Duration of the criteria-query runs, per task, from the query-run log.", task, nil),
		served: prometheus.NewDesc("loanq_requests_served_total",
			"Work requests served by criteria-query runs, per task.", task, nil),
		assigned: prometheus.NewDesc("loanq_loans_assigned_total",
			"Loans assigned by criteria-query runs, per task.", task, nil),
		backlog: prometheus.NewDesc("loanq_backlog_loans",
			"Loans waiting, per task: the rows its criteria match that are eligible (serve's periodic count, --backlog-every; absent before a count or after a failed one).", task, nil),
		backlogAge: prometheus.NewDesc("loanq_backlog_age_seconds",
			"Age of the task's loanq_backlog_loans count.", task, nil),
	}
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.refreshSeconds, c.refreshQueries, c.pending, c.oldestPending,
		c.active, c.oldestActive, c.overHold, c.activeByUser, c.eligible, c.dispositions, c.doneToday,
		c.runDuration, c.served, c.assigned, c.backlog, c.backlogAge} {
		ch <- d
	}
}

// Collect reads the cached snapshot (refreshing it if it is stale).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snap, err := c.Source.Get(ctx)
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	if snap == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.refreshSeconds, prometheus.GaugeValue, float64(snap.Refresh.DurationUS)/1e6)
	ch <- prometheus.MustNewConstMetric(c.refreshQueries, prometheus.GaugeValue, float64(snap.Refresh.Queries))
	bounds := make([]float64, len(runDurationBucketsMS))
	for i, ms := range runDurationBucketsMS {
		bounds[i] = float64(ms) / 1000
	}
	for _, f := range snap.Tasks {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, f.Name)
		}
		gauge(c.pending, float64(f.Pending))
		gauge(c.oldestPending, float64(f.OldestPendingMS)/1000)
		gauge(c.active, float64(f.Active))
		gauge(c.oldestActive, float64(f.OldestActiveMS)/1000)
		gauge(c.overHold, float64(f.OverHold))
		if f.EligibleLastRun != nil {
			gauge(c.eligible, float64(*f.EligibleLastRun))
		}
		if f.BacklogLoans != nil {
			gauge(c.backlog, float64(*f.BacklogLoans))
			gauge(c.backlogAge, float64(*f.BacklogAgeMS)/1000)
		}
		for _, k := range Dispositions {
			ch <- prometheus.MustNewConstMetric(c.dispositions, prometheus.CounterValue, float64(f.DoneTotal[k]), f.Name, k)
			ch <- prometheus.MustNewConstMetric(c.doneToday, prometheus.GaugeValue, float64(f.DoneToday[k]), f.Name, k)
		}
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b] = f.DurationBucketsC[i]
		}
		ch <- prometheus.MustNewConstHistogram(c.runDuration, uint64(f.Runs), float64(f.RunDurationMS)/1000, buckets, f.Name)
		ch <- prometheus.MustNewConstMetric(c.served, prometheus.CounterValue, float64(f.RequestsServed), f.Name)
		ch <- prometheus.MustNewConstMetric(c.assigned, prometheus.CounterValue, float64(f.LoansAssigned), f.Name)
	}
	if c.PerUser {
		for _, u := range snap.Users {
			for task, n := range u.ActiveByTask {
				ch <- prometheus.MustNewConstMetric(c.activeByUser, prometheus.GaugeValue, float64(n), task, u.User)
			}
		}
	}
}
