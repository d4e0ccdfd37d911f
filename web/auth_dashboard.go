package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The dashboard's scheme (serve --token-file, LOANQ_SERVE_TOKEN): one
// shared token, sent as `Authorization: Bearer TOKEN`, or exchanged once
// (/?token=TOKEN) for a cookie that holds an expiry and an HMAC of it keyed
// by the token. Nothing is stored: any serve process with the same token
// accepts the cookie, and changing the token ends every cookie.

// dashboardCookie is the session cookie set from a ?token= link.
const dashboardCookie = "loanq_session"

// dashboardAuth checks the dashboard's token on the routes it guards.
type dashboardAuth struct {
	token string        // "": no token, every request passes
	ttl   time.Duration // the cookie's lifetime
}

// require is the scheme's entry: h runs only for a request that carries
// the token or a valid cookie; a ?token= link sets the cookie and
// redirects to the same address without the token.
func (a dashboardAuth) require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token == "" {
			h.ServeHTTP(w, r)
			return
		}
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(bearer, a.token) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(dashboardCookie); err == nil && a.validCookie(c.Value) {
			h.ServeHTTP(w, r)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" && equal(tok, a.token) {
			exp := time.Now().Add(a.ttl)
			http.SetCookie(w, &http.Cookie{Name: dashboardCookie, Value: a.cookieValue(exp.Unix()), Path: "/",
				MaxAge: int(a.ttl / time.Second), Expires: exp,
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

// cookieValue is what the cookie holds: its expiry and an HMAC of it keyed
// by the token, so the token itself never sits in the browser's cookie
// store, and a copied cookie stops working when it expires (whatever the
// browser does with Max-Age) or the token changes.
func (a dashboardAuth) cookieValue(exp int64) string {
	e := strconv.FormatInt(exp, 10)
	m := hmac.New(sha256.New, []byte(a.token))
	m.Write([]byte("loanq serve session\x00" + e))
	return e + "." + hex.EncodeToString(m.Sum(nil))
}

// validCookie: made with this token, not expired, and not set to outlive
// the session TTL now in force.
func (a dashboardAuth) validCookie(v string) bool {
	e, _, ok := strings.Cut(v, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil {
		return false
	}
	now := time.Now()
	if exp <= now.Unix() || exp > now.Add(a.ttl+time.Minute).Unix() {
		return false
	}
	return equal(v, a.cookieValue(exp))
}

// equal compares secrets in constant time.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
