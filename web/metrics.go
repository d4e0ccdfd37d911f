package web

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loanq/loanq/dashboard"
)

// metricsHandler is /metrics: the dashboard's figures as Prometheus metrics
// (dashboard.Collector: the cached figures, no query of its own) and the
// serve process's own state. A registry of its own: /metrics shows loanq's
// families only.
func metricsHandler(src *dashboard.Source, perUser bool) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(dashboard.NewCollector(src, perUser)); err != nil {
		return nil, fmt.Errorf("registering the metrics: %w", err)
	}
	if err := reg.Register(dashboard.NewRuntimeCollector(src.DB)); err != nil {
		return nil, fmt.Errorf("registering the metrics: %w", err)
	}
	// promhttp compresses by itself when the scraper accepts gzip.
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}), nil
}
