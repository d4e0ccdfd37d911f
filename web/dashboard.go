package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/problem"
)

// The dashboard's pages (/, /tasks/NAME), their figures as JSON
// (/api/dashboard) and /healthz: read-only views of the figures that
// package dashboard reads and caches.

// DefaultMaxTasks bounds the tasks and processors the page and
// /api/dashboard show unless Config.MaxTasks says otherwise.
const DefaultMaxTasks = 100

const (
	// pageWait bounds how long a page waits for a refresh under way before
	// it answers with the figures it has; it is well below the server's
	// WriteTimeout, so the answer is always written.
	pageWait = 20 * time.Second
	// healthWait is the same for /healthz, which load balancers call with
	// short timeouts of their own.
	healthWait = 2 * time.Second
	// slowRefresh: a refresh running longer makes /healthz say degraded.
	slowRefresh = 10 * time.Second
)

// figures is what the pages read: a *dashboard.Source. An interface so
// that a test can stand in a refresh that hangs.
type figures interface {
	Get(ctx context.Context) (*dashboard.Snapshot, error)
	Health(ctx context.Context, maxAge time.Duration) dashboard.Health
	Task(ctx context.Context, name string) (*dashboard.TaskDetail, error)
}

// dashboardPages serves the dashboard's views.
type dashboardPages struct {
	fig       figures
	database  string        // the driver's name, shown on every page
	healthAge time.Duration // how old the figures /healthz reports may be
	maxTasks  int           // Config.MaxTasks
	workPage  bool          // /work is served: the pages link to it
	log       func(string)  // Config.Log; nil: none
	pages     *template.Template

	encMu            sync.Mutex
	encFor           *dashboard.Snapshot // the snapshot encBody and encGzip were made from
	encErr           string
	encBody, encGzip []byte
}

func newDashboardPages(cfg Config) (*dashboardPages, error) {
	funcs := template.FuncMap{"age": formatAge, "held": formatHeld, "ms": formatMS, "kinds": func() []string { return dashboard.Dispositions }}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/dashboard/*.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the page templates: %w", err)
	}
	return &dashboardPages{fig: cfg.Figures, database: cfg.Figures.Driver.Name(),
		// At most one refresh a second for /healthz, whatever --cache says.
		healthAge: max(cfg.Figures.TTL, time.Second),
		maxTasks:  cfg.MaxTasks, workPage: cfg.Engine != nil, log: cfg.Log, pages: t}, nil
}

// publicError is what a page or JSON says about a failed refresh: one line,
// nothing from the driver (its text names the host, port, user and
// database); the serve process logs that (dashboard.Source.Log).
func publicError(err error) string {
	if errors.Is(err, dashboard.ErrSlow) {
		return "the database is slow to answer (loanq serve logs the details)"
	}
	return "the database is unreachable (loanq serve logs why)"
}

// staleNote follows publicError where the last figures are still shown.
const staleNote = "; the figures shown are the last ones read"

// healthz answers from the state of the latest refresh of the figures: it
// never opens a connection of its own, so any number of probes cost the
// database at most one refresh per --cache interval (and per second).
func (d *dashboardPages) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthWait)
	h := d.fig.Health(ctx, d.healthAge)
	cancel()
	body := map[string]any{"status": "ok", "database": d.database, "duration_ms": h.Took.Milliseconds(), "age_ms": nil}
	if !h.LastOK.IsZero() {
		body["age_ms"] = time.Since(h.LastOK).Milliseconds()
	}
	code := http.StatusOK
	switch {
	case h.At.IsZero():
		code = http.StatusServiceUnavailable
		body["status"], body["error"] = "starting", "the first refresh of the figures has not ended yet"
	case !h.OK:
		code = http.StatusServiceUnavailable
		body["status"], body["error"] = "unavailable", "the database did not answer"
	case h.RefreshingFor > slowRefresh:
		code = http.StatusServiceUnavailable
		body["status"] = "degraded"
		body["error"] = fmt.Sprintf("the database is slow: a refresh of the figures has run for %d s", int(h.RefreshingFor.Seconds()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n'))
}

// figuresJSON is /api/dashboard: the bounded figures as JSON, gzipped when
// the client accepts it. Both forms are made once per refresh and shared by
// every viewer.
func (d *dashboardPages) figuresJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	snap, err := d.fig.Get(ctx)
	cancel()
	body, gz := d.encoded(snap, err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	code := http.StatusOK
	if snap == nil && err != nil {
		code = http.StatusServiceUnavailable
	}
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		body = gz
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

// encoded returns the JSON of the bounded snapshot, plain and gzipped,
// from the cache when the snapshot and the error are the same as last time.
func (d *dashboardPages) encoded(snap *dashboard.Snapshot, err error) (body, gz []byte) {
	msg := ""
	if err != nil {
		msg = publicError(err)
		if snap != nil {
			msg += staleNote
		}
	}
	d.encMu.Lock()
	defer d.encMu.Unlock()
	if d.encBody != nil && d.encFor == snap && d.encErr == msg {
		return d.encBody, d.encGzip
	}
	out := struct {
		*dashboard.Snapshot
		Error string `json:"error,omitempty"`
	}{Error: msg}
	if snap != nil {
		out.Snapshot = snap.Bounded(d.maxTasks)
	}
	b, _ := json.Marshal(out)
	body = append(b, '\n')
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(body)
	zw.Close()
	d.encFor, d.encErr, d.encBody, d.encGzip = snap, msg, body, buf.Bytes()
	return d.encBody, d.encGzip
}

// index is the dashboard (/).
func (d *dashboardPages) index(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	snap, err := d.fig.Get(ctx)
	cancel()
	data := map[string]any{"Database": d.database, "Snap": (*dashboard.Snapshot)(nil)}
	if snap != nil {
		data["Snap"] = snap.Bounded(d.maxTasks)
	}
	if err != nil {
		msg := publicError(err)
		if snap != nil {
			msg += staleNote
		}
		data["Error"] = msg
	}
	d.render(w, "index.html", data)
}

// taskPage is one task's page (/tasks/NAME).
func (d *dashboardPages) taskPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	defer cancel()
	detail, err := d.fig.Task(ctx, r.PathValue("name"))
	if err != nil {
		code, msg := http.StatusServiceUnavailable, publicError(err)
		if problem.KindOf(err) == problem.Usage {
			// "unknown task NAME": the visitor's own input, escaped by html/template.
			code, msg = http.StatusNotFound, err.Error()
		} else if d.log != nil {
			d.log("task page: " + err.Error())
		}
		w.WriteHeader(code)
		d.render(w, "error.html", map[string]any{"Error": msg, "Database": d.database})
		return
	}
	d.render(w, "task.html", map[string]any{"D": detail, "Database": d.database})
}

func (d *dashboardPages) render(w http.ResponseWriter, name string, data map[string]any) {
	data["WorkPage"] = d.workPage
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := d.pages.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(w, "\n<!-- template error: %s -->", template.HTMLEscapeString(err.Error()))
	}
}
