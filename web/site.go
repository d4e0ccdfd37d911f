package web

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The checks every route gets, before any authentication: answers that no
// other site may frame or script, and requests that only this server's own
// pages (or a client that is no browser) could send.

// secureHeaders: nothing on the pages comes from elsewhere, and nothing may
// frame them or run inline script.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// site is the Host and Origin check (sameSite).
type site struct {
	// allowedHosts are the host names, besides localhost and IP
	// addresses, that the server answers to (Config.AllowedHosts).
	allowedHosts []string
}

// sameSite refuses what another site's page could send: a Host header that
// is not one of this server's names (DNS rebinding: a page whose name
// resolves to this address, which the browser then treats as its own
// origin), and a request other than GET/HEAD whose Origin is another site.
// /healthz is exempt from the Host check: load balancers and probes call it
// by whatever address they have, and it shows no figures.
func (s site) sameSite(h http.Handler) http.Handler {
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
// every error, a problem document; elsewhere as plain text.
func forbid(w http.ResponseWriter, r *http.Request, why string) {
	if !strings.HasPrefix(r.URL.Path, "/api/v1/") {
		http.Error(w, "403 forbidden: "+why, http.StatusForbidden)
		return
	}
	writeProblem(w, http.StatusForbidden, "refused: "+why)
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
// are always answered; a name only when it is in allowedHosts.
func (s site) hostAllowed(hostport string) bool {
	h := hostOnly(hostport)
	if h == "" {
		return false
	}
	if h == "localhost" || net.ParseIP(h) != nil {
		return true
	}
	for _, a := range s.allowedHosts {
		if hostOnly(a) == h {
			return true
		}
	}
	return false
}
