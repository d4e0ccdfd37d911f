package web

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

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
	// MembershipHeader lists the user's loanq groups, comma-separated
	// (--proxy-groups-header; "": off): the groups tasks' allow lists name
	// (--allow @GROUP, docs/governance.md). serve keeps them in the
	// database as the user's memberships of source proxy, so that every
	// node, the engine's check and the database's see the same.
	MembershipHeader string

	syncGroups func(ctx context.Context, user string, groups []string) error // the engine's SyncProxyGroups
	synced     sync.Map                                                      // user → the groups last kept, joined
}

// keepGroups writes the groups the proxy's MembershipHeader names for user
// into the database when they differ from what this process last wrote
// for that user (one statement or none per call on the usual path).
func (pa *ProxyAuth) keepGroups(r *http.Request, user string) error {
	if pa.MembershipHeader == "" || pa.syncGroups == nil {
		return nil
	}
	var groups []string
	for _, v := range r.Header.Values(pa.MembershipHeader) {
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				groups = append(groups, g)
			}
		}
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	key := strings.Join(groups, ",")
	if last, ok := pa.synced.Load(user); ok && last.(string) == key {
		return nil
	}
	if err := pa.syncGroups(r.Context(), user, groups); err != nil {
		return err
	}
	pa.synced.Store(user, key)
	return nil
}

// caller is the scheme's entry for /api/v1/: the user the proxy names, or
// a 401 saying why there is none.
func (pa *ProxyAuth) caller(r *http.Request) (*dispatch.Principal, *refusal, error) {
	p, why := pa.principal(r)
	if p == nil {
		return nil, &refusal{status: http.StatusUnauthorized, detail: why}, nil
	}
	if err := pa.keepGroups(r, p.User); err != nil {
		return nil, nil, err
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
