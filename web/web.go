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
//	/api/v1/…         api*.go         the JSON API (Config.Engine)     (API token, proxy or page session)
//	/work, /work/…    workpage.go     the processor's page             (its own sessions)
package web

import (
	"net/http"
	"time"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/dispatch"
)

// DefaultSessionTTL is how long a session lasts unless Config.SessionTTL
// says otherwise.
const DefaultSessionTTL = 12 * time.Hour

// Config is what `loanq serve` serves, its flags checked.
type Config struct {
	// Figures is the dashboard's data: read and cached by package
	// dashboard, shown by the pages, /metrics and /healthz.
	Figures *dashboard.Source
	// Token, when set, is required on every dashboard route (not
	// /healthz): as `Authorization: Bearer TOKEN`, or as the cookie that
	// a visit with ?token=TOKEN sets.
	Token string
	// SessionTTL is how long that cookie lasts, and a session of the
	// processor's page (0: DefaultSessionTTL).
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
	// Engine, when set, serves the JSON API (/api/v1/) and the
	// processor's page (/work) (`loanq serve --api`): it does the work, as
	// the user each caller authenticates as (auth.go), whatever the
	// dashboard's Token. The dashboard links to the page.
	Engine *dispatch.Engine
	// Proxy, with Engine, is --auth proxy; nil is --auth token.
	Proxy *ProxyAuth
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
	mux.HandleFunc("GET /favicon.ico", favicon)
	mux.Handle("GET /metrics", token(metrics))
	mux.Handle("GET /api/dashboard", token(http.HandlerFunc(d.figuresJSON)))
	mux.Handle("GET /tasks/{name...}", token(gzipped(http.HandlerFunc(d.taskPage))))
	mux.Handle("GET /static/", token(http.StripPrefix("/static/", http.FileServerFS(assetDir("dashboard")))))
	mux.Handle("GET /{$}", token(gzipped(http.HandlerFunc(d.index))))
	if cfg.Engine != nil {
		// The API authenticates its callers itself (auth.go); anything
		// else under /api/v1/ is a problem document, under /work/ a 404.
		a := &api{e: cfg.Engine, admin: cfg.Engine.Admin(), log: cfg.Log, proxy: cfg.Proxy, sessionTTL: cfg.SessionTTL}
		if cfg.Proxy != nil {
			cfg.Proxy.syncGroups = a.admin.SyncProxyGroups // --proxy-groups-header
		}
		var patterns []string
		for _, rt := range a.routes() {
			mux.Handle(rt.method+" "+rt.path, a.authed(rt))
			patterns = append(patterns, rt.method+" "+rt.path)
		}
		a.methods = newMethodSet(patterns...)
		mux.HandleFunc("/api/v1/", a.notFound)
		wp, err := newWorkPage(a)
		if err != nil {
			return nil, err
		}
		mux.HandleFunc("GET /work", wp.page)
		mux.HandleFunc("POST /work/login", a.login)
		mux.HandleFunc("POST /work/logout", a.logout)
		mux.Handle("GET /work/assets/", wp.static())
		wp.methods = newMethodSet("GET /work", "POST /work/login", "POST /work/logout", "GET /work/assets/")
		// Any other method of /work too: else net/http redirects a POST
		// /work to /work/ (the catch-all has the path with a slash).
		mux.HandleFunc("/work", wp.notFound)
		mux.HandleFunc("/work/", wp.notFound)
	}
	return secureHeaders(site{allowedHosts: cfg.AllowedHosts}.sameSite(mux)), nil
}
