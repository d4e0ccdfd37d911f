package commands

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
)

// The processor's page of `loanq serve --api` (/work, docs/api.md): pick a
// task, ask for N loans, see "looking…" while the request is pending (the
// page long-polls GET /api/v1/requests/ID), the pipeline with Complete /
// Return after… / Never, and the day's history. The page calls the JSON API
// with a session cookie instead of a bearer token.
//
// Sign-in, --auth token: the user pastes their API token into a form on the
// page. Chosen over a one-time link because the user already holds the token
// (an admin issued it with `loanq token create`), a link would put a secret
// in the address bar, the history and proxy logs, and a link needs a second
// kind of credential to issue and expire. The token travels once, in a POST
// body, and is never kept by the browser: the cookie holds a session id.
// --auth proxy: the user the trusted proxy names opens a session on the
// first visit of /work, with nothing to type.
//
// Sessions are rows of loanq_session (migration 00015), so any serve node
// accepts a session another opened, and sign-out or expiry holds everywhere.

//go:embed workpage
var workAssets embed.FS

const (
	// sessionCookie holds the page's session id (HttpOnly, SameSite=Strict).
	sessionCookie = "loanq_work"
	// loginCookie holds the sign-in form's CSRF token (double submit: the
	// form echoes it in X-CSRF-Token), before any session exists.
	loginCookie = "loanq_work_login"
	csrfHeader  = "X-CSRF-Token"
)

type workPage struct {
	api   *apiServer
	ttl   time.Duration // session lifetime (--session-ttl)
	pages *template.Template
}

func newWorkPage(api *apiServer, ttl time.Duration) (*workPage, error) {
	t, err := template.ParseFS(workAssets, "workpage/*.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the work page templates: %w", err)
	}
	return &workPage{api: api, ttl: ttl, pages: t}, nil
}

// handler serves /work, /work/login, /work/logout and /work/assets/.
func (wp *workPage) handler() http.Handler {
	static, _ := fs.Sub(workAssets, "workpage")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", wp.page)
	mux.HandleFunc("POST /work/login", wp.login)
	mux.HandleFunc("POST /work/logout", wp.logout)
	mux.Handle("GET /work/assets/", http.StripPrefix("/work/assets/", assetsOnly(http.FileServerFS(static))))
	mux.HandleFunc("/work/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 not found: the processor's page is /work", http.StatusNotFound)
	})
	return mux
}

// assetsOnly serves the page's script and style, not its templates.
func assetsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".js") && !strings.HasSuffix(r.URL.Path, ".css") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// session reads the request's session; nil without a live one.
func (wp *workPage) session(r *http.Request) (*dispatch.Session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil
	}
	s, err := wp.api.e.SessionOf(r.Context(), c.Value)
	if err != nil || s == nil {
		return nil, err
	}
	if wp.api.proxy != nil && !wp.api.proxy.sameUser(r, s.User) {
		return nil, nil
	}
	return s, nil
}

// open starts a session for p and sets its cookie.
func (wp *workPage) open(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) (*dispatch.Session, error) {
	id, s, err := wp.api.e.CreateSession(r.Context(), p, wp.ttl)
	if err != nil {
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: int(wp.ttl / time.Second),
		Expires: time.Now().Add(wp.ttl), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	return s, nil
}

func (wp *workPage) page(w http.ResponseWriter, r *http.Request) {
	s, err := wp.session(r)
	if err != nil {
		wp.api.fail(w, err)
		return
	}
	if s == nil && wp.api.proxy != nil {
		p, why := wp.api.proxy.principal(r)
		if p == nil {
			w.WriteHeader(http.StatusUnauthorized)
			wp.render(w, "login.html", map[string]any{"Proxy": true, "Why": why})
			return
		}
		if s, err = wp.open(w, r, p); err != nil {
			wp.api.fail(w, err)
			return
		}
	}
	if s == nil {
		csrf, err := randomText()
		if err != nil {
			wp.api.fail(w, err)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: csrf, Path: "/work/", MaxAge: 3600,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
		wp.render(w, "login.html", map[string]any{"CSRF": csrf})
		return
	}
	wp.render(w, "work.html", map[string]any{"User": s.User, "Role": s.Role, "CSRF": s.CSRF, "Supervisor": s.Supervisor()})
}

// login is --auth token's sign-in: {"token": "lqt_…"} with the form's CSRF
// token; 204 and the session cookie when the API token is live.
func (wp *workPage) login(w http.ResponseWriter, r *http.Request) {
	if wp.api.proxy != nil {
		writeProblem(w, http.StatusNotFound, "with --auth proxy there is nothing to sign in to: open /work through the proxy")
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil {
		writeProblem(w, http.StatusForbidden, "no sign-in form cookie: open /work and sign in from the page")
		return
	}
	if why := csrfRefused(r, c.Value); why != "" {
		writeProblem(w, http.StatusForbidden, why)
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := decode(r, &body); err != nil {
		wp.api.fail(w, err)
		return
	}
	p, err := wp.api.e.Authenticate(r.Context(), strings.TrimSpace(body.Token))
	if err != nil {
		wp.api.fail(w, err)
		return
	}
	if p == nil {
		writeProblem(w, http.StatusUnauthorized, "that token is unknown, revoked or expired: ask your supervisor for one (`loanq token create`)")
		return
	}
	if _, err := wp.open(w, r, p); err != nil {
		wp.api.fail(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/work/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// logout ends the session (in the database: on every node) and drops the
// cookie.
func (wp *workPage) logout(w http.ResponseWriter, r *http.Request) {
	s, err := wp.session(r)
	if err != nil {
		wp.api.fail(w, err)
		return
	}
	if s == nil {
		writeProblem(w, http.StatusUnauthorized, "no session to end")
		return
	}
	if why := csrfRefused(r, s.CSRF); why != "" {
		writeProblem(w, http.StatusForbidden, why)
		return
	}
	c, _ := r.Cookie(sessionCookie)
	if err := wp.api.e.EndSession(r.Context(), c.Value); err != nil {
		wp.api.fail(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func (wp *workPage) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := wp.pages.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(w, "\n<!-- template error: %s -->", template.HTMLEscapeString(err.Error()))
	}
}

// csrfRefused checks a cookie-authenticated call that changes something
// (anything but GET and HEAD): its Origin must be this server's and its
// X-CSRF-Token header the session's (or the sign-in form's) token. "" when
// it passes. The dashboard's sameSite check already refuses a foreign Origin
// when one is sent; here it must be sent: every browser sends it on a POST
// or DELETE made by fetch.
func csrfRefused(r *http.Request, want string) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return ""
	}
	o := r.Header.Get("Origin")
	u, err := url.Parse(o)
	if o == "" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "refused: a " + r.Method + " with a session cookie must come from this server's own page (Origin)"
	}
	got := r.Header.Get(csrfHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return "refused: missing or wrong " + csrfHeader + " (reload /work)"
	}
	return ""
}

// sameUser: a call that comes from a trusted proxy naming a user must name
// the session's user (another person signed in through the same browser
// gets a fresh session, not the previous user's).
func (pa *proxyAuth) sameUser(r *http.Request, user string) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return true
	}
	for _, n := range pa.trusted {
		if n.Contains(ip) {
			named := r.Header.Get(pa.userHeader)
			return named == "" || named == user
		}
	}
	return true
}

// randomText is 32 random bytes, base64url.
func randomText() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// secure: the page was reached over HTTPS, directly or through a proxy that
// ended TLS (X-Forwarded-Proto). Believing the header from anyone is safe
// here: it can only make a caller's own cookie stricter (sent over HTTPS only).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
