package dashboard

import (
	"bytes"
	"compress/gzip"
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
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loanq/loanq/problem"
)

//go:embed assets
var assets embed.FS

// cookieName is the session cookie set from a ?token= link.
const cookieName = "loanq_session"

// Defaults of the Server's settings.
const (
	// DefaultSessionTTL is how long a session cookie lasts.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxTasks bounds the tasks and processors the page and
	// /api/dashboard show.
	DefaultMaxTasks = 100
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
	// AllowedHosts are the host names, besides localhost and IP addresses,
	// that the server answers to (the Host header, any port): a page of
	// another site that rebinds its own name to this address is refused.
	AllowedHosts []string
	// SessionTTL is how long a session cookie lasts (0: DefaultSessionTTL).
	SessionTTL time.Duration
	// MaxTasks bounds the tasks and processors the page and /api/dashboard
	// show, the busiest first (0: all).
	MaxTasks int
	// API, when set, serves /api/v1/ (`loanq serve --api`): it
	// authenticates its callers itself (API tokens), so the dashboard's
	// token does not apply to it; the Host and Origin checks do.
	API http.Handler
	// Work, when set, serves the processor's page (/work, /work/…): it
	// signs its users in itself (a session cookie), so the dashboard's
	// token does not apply to it; the Host and Origin checks do. The
	// dashboard links to it.
	Work http.Handler

	pages *template.Template

	encMu            sync.Mutex
	encFor           *Snapshot // the snapshot encBody and encGzip were made from
	encErr           string
	encBody, encGzip []byte
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
	if err := reg.Register(newRuntimeCollector(s.Source.DB)); err != nil {
		return nil, fmt.Errorf("registering the metrics: %w", err)
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	// promhttp compresses by itself when the scraper accepts gzip.
	mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	mux.Handle("GET /api/dashboard", s.auth(http.HandlerFunc(s.apiDashboard)))
	mux.Handle("GET /tasks/{name...}", s.auth(gzipped(http.HandlerFunc(s.taskPage))))
	mux.Handle("GET /static/", s.auth(http.StripPrefix("/static/", http.FileServerFS(static))))
	mux.Handle("GET /{$}", s.auth(gzipped(http.HandlerFunc(s.index))))
	if s.API != nil {
		mux.Handle("/api/v1/", s.API)
	}
	if s.Work != nil {
		mux.Handle("/work", s.Work)
		mux.Handle("/work/", s.Work)
	}
	return secureHeaders(s.sameSite(mux)), nil
}

// NewHTTPServer is the http.Server of `loanq serve`: every phase of a
// connection has a deadline, so a client that sends or reads slowly (or not
// at all) cannot hold a connection and its goroutine for ever.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Above pageWait, and above the API's longest wait (60 s): a page
		// that waited for a slow refresh, or an API call that waited for
		// its request, still has time to write its answer.
		WriteTimeout:   90 * time.Second,
		IdleTimeout:    60 * time.Second,
		MaxHeaderBytes: 64 << 10,
	}
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

// sameSite refuses what another site's page could send: a Host header that
// is not one of this server's names (DNS rebinding: a page whose name
// resolves to this address, which the browser then treats as its own
// origin), and a request other than GET/HEAD whose Origin is another site.
// /healthz is exempt from the Host check: load balancers and probes call it
// by whatever address they have, and it shows no figures.
func (s *Server) sameSite(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !s.hostAllowed(r.Host) {
			forbid(w, r, fmt.Sprintf("loanq serve does not answer to the host name %q "+
				"(if that is this server's name, add it with --allowed-hosts)", hostOnly(r.Host)))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if o := r.Header.Get("Origin"); o != "" {
				u, err := url.Parse(o)
				if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
					forbid(w, r, "a cross-origin request")
					return
				}
			}
			if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
				forbid(w, r, "a cross-site request")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// forbid refuses a request with 403: under /api/v1/ as the API answers
// every error, an application/problem+json document (RFC 9457); elsewhere
// as plain text.
func forbid(w http.ResponseWriter, r *http.Request, why string) {
	if !strings.HasPrefix(r.URL.Path, "/api/v1/") {
		http.Error(w, "403 forbidden: "+why, http.StatusForbidden)
		return
	}
	b, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(http.StatusForbidden),
		"status": http.StatusForbidden, "detail": "refused: " + why})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(b)
}

// hostOnly is a Host header without its port, lower case.
func hostOnly(hostport string) string {
	h := hostport
	if x, _, err := net.SplitHostPort(hostport); err == nil {
		h = x
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// hostAllowed: an IP address or localhost cannot be rebound to this server
// by another site (its page would be that address's own origin), so they
// are always answered; a name only when it is in AllowedHosts.
func (s *Server) hostAllowed(hostport string) bool {
	h := hostOnly(hostport)
	if h == "" {
		return false
	}
	if h == "localhost" || net.ParseIP(h) != nil {
		return true
	}
	for _, a := range s.AllowedHosts {
		if hostOnly(a) == h {
			return true
		}
	}
	return false
}

func (s *Server) sessionTTL() time.Duration {
	if s.SessionTTL > 0 {
		return s.SessionTTL
	}
	return DefaultSessionTTL
}

// sessionValue is what the cookie holds: its expiry and an HMAC of it keyed
// by the token, so the token itself never sits in the browser's cookie
// store, and a copied cookie stops working when it expires (whatever the
// browser does with Max-Age) or the token changes.
func (s *Server) sessionValue(exp int64) string {
	e := strconv.FormatInt(exp, 10)
	m := hmac.New(sha256.New, []byte(s.Token))
	m.Write([]byte("loanq serve session\x00" + e))
	return e + "." + hex.EncodeToString(m.Sum(nil))
}

// validSession: made with this token, not expired, and not set to outlive
// the session TTL now in force.
func (s *Server) validSession(v string) bool {
	e, _, ok := strings.Cut(v, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil {
		return false
	}
	now := time.Now()
	if exp <= now.Unix() || exp > now.Add(s.sessionTTL()+time.Minute).Unix() {
		return false
	}
	return equal(v, s.sessionValue(exp))
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
		if c, err := r.Cookie(cookieName); err == nil && s.validSession(c.Value) {
			h.ServeHTTP(w, r)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" && equal(tok, s.Token) {
			ttl := s.sessionTTL()
			exp := time.Now().Add(ttl)
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.sessionValue(exp.Unix()), Path: "/",
				MaxAge: int(ttl / time.Second), Expires: exp,
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

// publicError is what a page or JSON says about a failed refresh: one line,
// nothing from the driver (its text names the host, port, user and
// database); the serve process logs that (Source.Log).
func publicError(err error) string {
	if errors.Is(err, ErrSlow) {
		return "the database is slow to answer (loanq serve logs the details)"
	}
	return "the database is unreachable (loanq serve logs why)"
}

// staleNote follows publicError where the last figures are still shown.
const staleNote = "; the figures shown are the last ones read"

// healthz answers from the state of the latest refresh of the figures: it
// never opens a connection of its own, so any number of probes cost the
// database at most one refresh per --cache interval (and per second).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthWait)
	h := s.Source.Health(ctx, max(s.Source.TTL, time.Second))
	cancel()
	body := map[string]any{"status": "ok", "database": s.Source.Driver.Name(), "duration_ms": h.Took.Milliseconds(), "age_ms": nil}
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

// apiDashboard sends the bounded figures as JSON, gzipped when the client
// accepts it. Both forms are made once per refresh and shared by every
// viewer.
func (s *Server) apiDashboard(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	snap, err := s.Source.Get(ctx)
	cancel()
	body, gz := s.encoded(snap, err)
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
func (s *Server) encoded(snap *Snapshot, err error) (body, gz []byte) {
	msg := ""
	if err != nil {
		msg = publicError(err)
		if snap != nil {
			msg += staleNote
		}
	}
	s.encMu.Lock()
	defer s.encMu.Unlock()
	if s.encBody != nil && s.encFor == snap && s.encErr == msg {
		return s.encBody, s.encGzip
	}
	out := struct {
		*Snapshot
		Error string `json:"error,omitempty"`
	}{Error: msg}
	if snap != nil {
		out.Snapshot = snap.Bounded(s.MaxTasks)
	}
	b, _ := json.Marshal(out)
	body = append(b, '\n')
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(body)
	zw.Close()
	s.encFor, s.encErr, s.encBody, s.encGzip = snap, msg, body, buf.Bytes()
	return s.encBody, s.encGzip
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	snap, err := s.Source.Get(ctx)
	cancel()
	data := map[string]any{"Database": s.Source.Driver.Name(), "Snap": (*Snapshot)(nil)}
	if snap != nil {
		data["Snap"] = snap.Bounded(s.MaxTasks)
	}
	if err != nil {
		msg := publicError(err)
		if snap != nil {
			msg += staleNote
		}
		data["Error"] = msg
	}
	s.render(w, "index.html", data)
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageWait)
	defer cancel()
	d, err := s.Source.Task(ctx, r.PathValue("name"))
	if err != nil {
		code, msg := http.StatusServiceUnavailable, publicError(err)
		if problem.KindOf(err) == problem.Usage {
			// "unknown task NAME": the visitor's own input, escaped by html/template.
			code, msg = http.StatusNotFound, err.Error()
		} else if s.Log != nil {
			s.Log("task page: " + err.Error())
		}
		w.WriteHeader(code)
		s.render(w, "error.html", map[string]any{"Error": msg, "Database": s.Source.Driver.Name()})
		return
	}
	s.render(w, "task.html", map[string]any{"D": d, "Database": s.Source.Driver.Name()})
}

func (s *Server) render(w http.ResponseWriter, name string, data map[string]any) {
	data["WorkPage"] = s.Work != nil
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(w, "\n<!-- template error: %s -->", template.HTMLEscapeString(err.Error()))
	}
}

// acceptsGzip: the client's Accept-Encoding names gzip (or *) with a
// weight above 0.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q > 0
		}
		return true
	}
	return false
}

// gzipped compresses h's answer when the client accepts gzip.
func gzipped(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		h.ServeHTTP(&gzipWriter{ResponseWriter: w, zw: zw}, r)
	})
}

type gzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

func (g *gzipWriter) WriteHeader(code int) {
	g.Header().Del("Content-Length") // the length before compression
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) { return g.zw.Write(b) }

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

// shutdownGrace is how long Serve waits for requests under way when ctx
// ends (a variable for the tests).
var shutdownGrace = 5 * time.Second

// Serve runs the server on ln until ctx ends, then lets the requests under
// way finish for shutdownGrace and closes what is left: a client holding a
// connection on which it never sent a request (http.Server counts such a
// connection as busy for its first 5 s) does not turn a stop into a failure.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(shut)
	if errors.Is(err, context.DeadlineExceeded) {
		return srv.Close()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
