package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
)

// The processor's page's sessions (/work, docs/api.md). The page calls the
// JSON API with a session cookie instead of a bearer token.
//
// Sign-in, --auth token: the user pastes their API token into a form on the
// page. Chosen over a one-time link because the user already holds the token
// (an admin issued it with `loanq token create`), a link would put a secret
// in the address bar, the history and proxy logs, and a link needs a second
// kind of credential to issue and expire. The token travels once, in a POST
// body, and is never kept by the browser: the cookie holds a session id.
// --auth proxy: the user the trusted proxy names opens a session on the
// first visit of /work, with nothing to type (workpage.go).
//
// Sessions are rows of loanq_session (migration 00015), so any serve node
// accepts a session another opened, and sign-out or expiry holds everywhere.
// A call with a session cookie that changes something must also come from
// this server's page: its Origin, and its CSRF token (csrfRefused).

const (
	// sessionCookie holds the page's session id (HttpOnly, SameSite=Strict).
	sessionCookie = "loanq_work"
	// loginCookie holds the sign-in form's CSRF token (double submit: the
	// form echoes it in X-CSRF-Token), before any session exists.
	loginCookie = "loanq_work_login"
	csrfHeader  = "X-CSRF-Token"
)

// sessionCaller is the scheme's entry for /api/v1/: the session whose id
// the cookie holds, if it is live, still the proxy's user (--auth proxy),
// and, for anything but GET and HEAD, the call passes csrfRefused.
func (a *api) sessionCaller(r *http.Request, id string) (*dispatch.Principal, *refusal, error) {
	s, err := a.admin.SessionOf(r.Context(), id)
	switch {
	case err != nil:
		return nil, nil, err
	case s == nil:
		return nil, &refusal{status: http.StatusUnauthorized, detail: "your session has expired or ended: sign in again at /work"}, nil
	case a.proxy != nil && !a.proxy.sameUser(r, s.User):
		return nil, &refusal{status: http.StatusUnauthorized, detail: "the proxy names another user than this session's: sign in again at /work"}, nil
	}
	if why := csrfRefused(r, s.CSRF); why != "" {
		return nil, &refusal{status: http.StatusForbidden, detail: why}, nil
	}
	return &s.Principal, nil, nil
}

// session reads the request's session for the page; nil without a live
// one, or when the proxy now names someone else.
func (a *api) session(r *http.Request) (*dispatch.Session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil
	}
	s, err := a.admin.SessionOf(r.Context(), c.Value)
	if err != nil || s == nil {
		return nil, err
	}
	if a.proxy != nil && !a.proxy.sameUser(r, s.User) {
		return nil, nil
	}
	return s, nil
}

// openSession starts a session for p and sets its cookie.
func (a *api) openSession(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) (*dispatch.Session, error) {
	id, s, err := a.admin.CreateSession(r.Context(), p, a.sessionTTL)
	if err != nil {
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: int(a.sessionTTL / time.Second),
		Expires: time.Now().Add(a.sessionTTL), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	return s, nil
}

// loginForm sets the sign-in form's CSRF cookie and returns the token the
// form echoes.
func loginForm(w http.ResponseWriter, r *http.Request) (string, error) {
	csrf, err := randomText()
	if err != nil {
		return "", err
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: csrf, Path: "/work/", MaxAge: 3600,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	return csrf, nil
}

// login is --auth token's sign-in (POST /work/login): {"token": "lqt_…"}
// with the form's CSRF token; 204 and the session cookie when the API token
// is live.
func (a *api) login(w http.ResponseWriter, r *http.Request) {
	if a.proxy != nil {
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
		a.fail(w, err)
		return
	}
	p, err := a.admin.Authenticate(r.Context(), strings.TrimSpace(body.Token))
	if err != nil {
		a.fail(w, err)
		return
	}
	if p == nil {
		writeProblem(w, http.StatusUnauthorized, "that token is unknown, revoked or expired: ask your supervisor for one (`loanq token create`)")
		return
	}
	if _, err := a.openSession(w, r, p); err != nil {
		a.fail(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/work/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// logout (POST /work/logout) ends the session (in the database: on every
// node) and drops the cookie.
func (a *api) logout(w http.ResponseWriter, r *http.Request) {
	s, err := a.session(r)
	if err != nil {
		a.fail(w, err)
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
	if err := a.admin.EndSession(r.Context(), c.Value); err != nil {
		a.fail(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// csrfRefused checks a cookie-authenticated call that changes something
// (anything but GET and HEAD): its Origin must be this server's and its
// X-CSRF-Token header the session's (or the sign-in form's) token. "" when
// it passes. The site check (site.go) already refuses a foreign Origin when
// one is sent; here it must be sent: every browser sends it on a POST or
// DELETE made by fetch.
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
