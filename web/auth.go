package web

import (
	"fmt"
	"net/http"

	"github.com/loanq/loanq/dispatch"
)

// Who may call what. Four schemes, one entry each:
//
//	scheme                               entry                 file               guards
//	the dashboard's token, HMAC cookie   dashboardAuth.require auth_dashboard.go  /, /tasks/, /static/, /api/dashboard, /metrics
//	API token (Bearer), --auth token     (*api).tokenCaller    auth_token.go      /api/v1/
//	reverse proxy's header, --auth proxy (*ProxyAuth).caller   auth_proxy.go      /api/v1/, /work
//	the processor's page's session+CSRF  (*api).sessionCaller  auth_session.go    /api/v1/ from /work; /work/login, /work/logout
//
// /healthz and GET /api/v1/openapi.json need none. Every route also passes
// the Host and Origin checks first (site.go). An /api/v1/ call is
// authenticated by authed, on every call: a revoked token or an ended
// session is refused at once by every serve process.

// refusal is why a call is not authenticated: its status and the problem's
// detail; challenge adds `WWW-Authenticate: Bearer` (a 401 of the token
// scheme).
type refusal struct {
	status    int
	detail    string
	challenge bool
}

// caller is the user an /api/v1/ call acts as: the page's session when the
// call carries its cookie and no Authorization header, else the proxy's
// header under --auth proxy, else the bearer token. A nil principal comes
// with a refusal or an error.
func (a *api) caller(r *http.Request) (*dispatch.Principal, *refusal, error) {
	if c, err := r.Cookie(sessionCookie); err == nil && r.Header.Get("Authorization") == "" {
		return a.sessionCaller(r, c.Value)
	}
	if a.proxy != nil {
		return a.proxy.caller(r)
	}
	return a.tokenCaller(r)
}

// authed runs rt's handler for a caller that may call it: anyone for a
// public route, supervisors only for a supervisor route.
func (a *api) authed(rt apiRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.public {
			rt.h(w, r, nil)
			return
		}
		p, no, err := a.caller(r)
		switch {
		case err != nil:
			a.fail(w, err)
			return
		case no != nil:
			if no.challenge {
				w.Header().Set("WWW-Authenticate", `Bearer realm="loanq"`)
			}
			writeProblem(w, no.status, no.detail)
			return
		}
		if rt.supervisor && !p.Supervisor() {
			writeProblem(w, http.StatusForbidden, fmt.Sprintf("%s %s is for supervisors; %s is a processor here", rt.method, rt.path, p.User))
			return
		}
		rt.h(w, r, p)
	})
}
