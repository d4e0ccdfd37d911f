package web

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/loanq/loanq/dispatch"
)

// ProxyAuth is `serve --api --auth proxy`: a reverse proxy in front of
// serve authenticates users and names them in a header. The header is
// honoured only from the Trusted addresses: from anywhere else the call is
// unauthenticated, whatever it says.
type ProxyAuth struct {
	// Trusted are the proxy's addresses (--trusted-proxy).
	Trusted []*net.IPNet
	// UserHeader names the user (--user-header).
	UserHeader string
	// GroupsHeader lists the user's groups, comma-separated
	// (--groups-header); "": no groups, every user a processor.
	GroupsHeader string
	// SupervisorGroup is the group whose members are supervisors
	// (--supervisor-group).
	SupervisorGroup string
}

// caller is the scheme's entry for /api/v1/: the user the proxy names, or
// a 401 saying why there is none.
func (pa *ProxyAuth) caller(r *http.Request) (*dispatch.Principal, *refusal, error) {
	p, why := pa.principal(r)
	if p == nil {
		return nil, &refusal{status: http.StatusUnauthorized, detail: why}, nil
	}
	return p, nil, nil
}

// principal reads the user a trusted proxy names; nil, and why, when the
// call did not come from a trusted address or names nobody.
func (pa *ProxyAuth) principal(r *http.Request) (*dispatch.Principal, string) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !slices.ContainsFunc(pa.Trusted, func(n *net.IPNet) bool { return n.Contains(ip) }) {
		return nil, "this call did not come from a --trusted-proxy address: send it through the proxy"
	}
	user := r.Header.Get(pa.UserHeader)
	if user == "" || strings.TrimSpace(user) != user || len(r.Header.Values(pa.UserHeader)) != 1 {
		return nil, "the proxy named no user (one " + pa.UserHeader + " header)"
	}
	p := &dispatch.Principal{User: user, Role: dispatch.TokenProcessor}
	if pa.GroupsHeader != "" {
		for _, v := range r.Header.Values(pa.GroupsHeader) {
			for _, g := range strings.Split(v, ",") {
				if strings.TrimSpace(g) == pa.SupervisorGroup {
					p.Role = dispatch.TokenSupervisor
				}
			}
		}
	}
	return p, ""
}

// sameUser: a call that comes from a trusted proxy naming a user must name
// the session's user (another person signed in through the same browser
// gets a fresh session, not the previous user's).
func (pa *ProxyAuth) sameUser(r *http.Request, user string) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return true
	}
	for _, n := range pa.Trusted {
		if n.Contains(ip) {
			named := r.Header.Get(pa.UserHeader)
			return named == "" || named == user
		}
	}
	return true
}
