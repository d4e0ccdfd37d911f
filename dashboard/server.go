package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loanq/loanq/problem"
)

//go:embed assets
var assets embed.FS

// cookieName is the session cookie set from a ?token= link.
const cookieName = "loanq_session"

// Server is the HTTP side of `loanq serve`.
type Server struct {
	Source *Source
	// Token, when set, is required on every path but /healthz: as
	// `Authorization: Bearer TOKEN`, or as the session cookie that a visit
	// with ?token=TOKEN sets.
	Token   string
	PerUser bool
	// Log, when set, receives errors the pages do not show.
	Log func(string)

	pages *template.Template
}

// Handler builds the routes.
func (s *Server) Handler() (http.Handler, error) {
	funcs := template.FuncMap{"age": formatAge, "held": formatHeld, "ms": formatMS, "kinds": func() []string { return Dispositions }}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the page templates: %w", err)
	}
	s.pages = t
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(s.Source, s.PerUser)); err != nil {
		return nil, fmt.Errorf("registering the metrics: %w", err)
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	mux.Handle("GET /api/dashboard", s.auth(http.HandlerFunc(s.apiDashboard)))
	mux.Handle("GET /tasks/{name...}", s.auth(http.HandlerFunc(s.taskPage)))
	mux.Handle("GET /static/", s.auth(http.StripPrefix("/static/", http.FileServerFS(static))))
	mux.Handle("GET /{$}", s.auth(http.HandlerFunc(s.index)))
	return secureHeaders(mux), nil
}

// secureHeaders: nothing on the page comes from elsewhere, and nothing may
// frame it or run inline script.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// sessionValue is what the cookie holds: derived from the token, so the
// token itself never sits in the browser's cookie store.
func (s *Server) sessionValue() string {
	m := hmac.New(sha256.New, []byte(s.Token))
	m.Write([]byte("loanq serve session"))
	return hex.EncodeToString(m.Sum(nil))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Token == "" {
			h.ServeHTTP(w, r)
			return
		}
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(bearer, s.Token) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && equal(c.Value, s.sessionValue()) {
			h.ServeHTTP(w, r)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" && equal(tok, s.Token) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.sessionValue(), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			// Drop the token from the address bar and the history.
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="loanq"`)
		http.Error(w, "401 unauthorized: this loanq serve needs its token (Authorization: Bearer TOKEN, or open the page once with ?token=TOKEN)", http.StatusUnauthorized)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	start := time.Now()
	err := s.Source.Ping(r.Context())
	body := map[string]any{"status": "ok", "database": s.Source.Driver.Name(), "duration_ms": time.Since(start).Milliseconds()}
	code := http.StatusOK
	if err != nil {
		code = http.StatusServiceUnavailable
		// No driver error text: it may name hosts and users, and the page
		// must say nothing about the DSN. The serve process logs it.
		body["status"] = "unavailable"
		body["error"] = "the database did not answer"
		if s.Log != nil {
			s.Log("healthz: " + err.Error())
		}
	}
	w.WriteHeader(code)
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n'))
}

func (s *Server) apiDashboard(w http.ResponseWriter, r *http.Request) {
	snap, err := s.Source.Get(r.Context())
	w.Header().Set("Content-Type", "application/json")
	out := struct {
		*Snapshot
		Error string `json:"error,omitempty"`
	}{Snapshot: snap}
	if err != nil {
		out.Error = "cannot read the figures: " + err.Error()
		if snap == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	json.NewEncoder(w).Encode(out)
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	snap, err := s.Source.Get(r.Context())
	data := map[string]any{"Snap": snap, "Database": s.Source.Driver.Name()}
	if err != nil {
		data["Error"] = "cannot read the figures: " + err.Error()
	}
	s.render(w, "index.html", data)
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.Source.Task(r.Context(), r.PathValue("name"))
	if err != nil {
		code := http.StatusInternalServerError
		if problem.KindOf(err) == problem.Usage {
			code = http.StatusNotFound
		}
		w.WriteHeader(code)
		s.render(w, "error.html", map[string]any{"Error": err.Error(), "Database": s.Source.Driver.Name()})
		return
	}
	s.render(w, "task.html", map[string]any{"D": d, "Database": s.Source.Driver.Name()})
}

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(w, "\n<!-- template error: %s -->", template.HTMLEscapeString(err.Error()))
	}
}

// formatAge prints milliseconds as a short age: 45s, 12m, 3h05m, 2d4h.
func formatAge(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms <= 0:
		return "–"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// formatHeld is formatAge for a duration that may be under a second.
func formatHeld(ms int64) string {
	if ms < 1000 {
		return "<1s"
	}
	return formatAge(ms)
}

// formatMS prints a duration in milliseconds.
func formatMS(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

// Serve runs the server on ln until ctx ends, then shuts down within 5 s.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
