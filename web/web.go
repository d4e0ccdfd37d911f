// Package web is the HTTP side of `loanq serve`: one mux with every route,
// the checks every route gets (site.go), the authentication schemes
// (auth*.go) and the answers (problem.go). It holds no business rule:
// the figures come from package dashboard, the work from dispatch.
//
//	/healthz          dashboard.go    state of the latest refresh; no auth, no Host check
//	/, /tasks/NAME    dashboard.go    the dashboard's pages            (dashboard token)
//	/api/dashboard    dashboard.go    the figures as JSON              (dashboard token)
//	/static/          assets/dashboard                                 (dashboard token)
//	/metrics          metrics.go      Prometheus                       (dashboard token)
//	/api/v1/…         (Config.API)    the JSON API                     (its own auth)
//	/work, /work/…    (Config.Work)   the processor's page             (its own sessions)
package web

import (
	"net/http"
	"time"

	"github.com/loanq/loanq/dashboard"
)

// Config is what `loanq serve` serves, its flags checked.
type Config struct {
	// Figures is the dashboard's data: read and cached by package
	// dashboard, shown by the pages, /metrics and /healthz.
	Figures *dashboard.Source
	// Token, when set, is required on every dashboard route (not
	// /healthz): as `Authorization: Bearer TOKEN`, or as the cookie that
	// a visit with ?token=TOKEN sets.
	Token string
	// SessionTTL is how long that cookie lasts (0: DefaultSessionTTL).
	SessionTTL time.Duration
	// AllowedHosts are the host names, besides localhost and IP
	// addresses, that the server answers to (the Host header, any port):
	// a page of another site that rebinds its own name to this address
	// is refused.
	AllowedHosts []string
	// MaxTasks bounds the tasks and processors the page and /api/dashboard
	// show, the busiest first (0: all).
	MaxTasks int
	// PerUser adds the per-processor series to /metrics.
	PerUser bool
	// Log, when set, receives the errors the answers do not show.
	Log func(string)
	// API, when set, serves /api/v1/ (`loanq serve --api`): it
	// authenticates its callers itself (API tokens), so the dashboard's
	// token does not apply to it; the Host and Origin checks do.
	API http.Handler
	// Work, when set, serves the processor's page (/work, /work/…): it
	// signs its users in itself (a session cookie), so the dashboard's
	// token does not apply to it; the Host and Origin checks do. The
	// dashboard links to it.
	Work http.Handler
}

// Handler builds every route of `loanq serve`.
func Handler(cfg Config) (http.Handler, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	d, err := newDashboardPages(cfg)
	if err != nil {
		return nil, err
	}
	metrics, err := metricsHandler(cfg.Figures, cfg.PerUser)
	if err != nil {
		return nil, err
	}
	token := dashboardAuth{token: cfg.Token, ttl: cfg.SessionTTL}.require

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.Handle("GET /metrics", token(metrics))
	mux.Handle("GET /api/dashboard", token(http.HandlerFunc(d.figuresJSON)))
	mux.Handle("GET /tasks/{name...}", token(gzipped(http.HandlerFunc(d.taskPage))))
	mux.Handle("GET /static/", token(http.StripPrefix("/static/", http.FileServerFS(assetDir("dashboard")))))
	mux.Handle("GET /{$}", token(gzipped(http.HandlerFunc(d.index))))
	if cfg.API != nil {
		mux.Handle("/api/v1/", cfg.API)
	}
	if cfg.Work != nil {
		mux.Handle("/work", cfg.Work)
		mux.Handle("/work/", cfg.Work)
	}
	return secureHeaders(site{allowedHosts: cfg.AllowedHosts}.sameSite(mux)), nil
}
