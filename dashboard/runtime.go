package dashboard

import (
	"database/sql"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// runtimeCollector exports the serve process's own state: goroutines, Go
// heap and the database pool. A load run (scripts/api-load) reads them
// before and after to see that nothing is left behind. Named loanq_serve_…
// like every metric here (no go_… families: /metrics is loanq's only).
type runtimeCollector struct {
	db                                       *sql.DB
	goroutines, heap, sys, open, inUse, wait *prometheus.Desc
}

// NewRuntimeCollector is the collector of the serve process's own state
// for /metrics (web/); db is the pool whose connections it counts (nil:
// none).
func NewRuntimeCollector(db *sql.DB) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &runtimeCollector{db: db,
		goroutines: d("loanq_serve_goroutines", "goroutines of this serve process"),
		heap:       d("loanq_serve_heap_inuse_bytes", "bytes in in-use spans of this serve process's Go heap"),
		sys:        d("loanq_serve_memory_sys_bytes", "bytes of memory this serve process obtained from the system (Go runtime)"),
		open:       d("loanq_serve_db_connections_open", "database connections open in this serve process's pool (bounded by --max-conns)"),
		inUse:      d("loanq_serve_db_connections_in_use", "database connections in use in this serve process's pool"),
		wait:       d("loanq_serve_db_connection_waits_total", "times a call waited for a free connection of the pool"),
	}
}

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.goroutines, c.heap, c.sys, c.open, c.inUse, c.wait} {
		ch <- d
	}
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	ch <- prometheus.MustNewConstMetric(c.goroutines, prometheus.GaugeValue, float64(runtime.NumGoroutine()))
	ch <- prometheus.MustNewConstMetric(c.heap, prometheus.GaugeValue, float64(m.HeapInuse))
	ch <- prometheus.MustNewConstMetric(c.sys, prometheus.GaugeValue, float64(m.Sys))
	if c.db != nil {
		s := c.db.Stats()
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(s.OpenConnections))
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(s.InUse))
		ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, float64(s.WaitCount))
	}
}
