package web

import (
	"net/http"
	"strings"

	"github.com/loanq/loanq/dispatch"
)

// --auth token: every call sends an API token (`loanq token create`) as
// `Authorization: Bearer TOKEN`; the engine looks up its hash on every call,
// so a revoked or expired token is refused from the next call on.

// tokenCaller is the scheme's entry: the token's user and role.
func (a *api) tokenCaller(r *http.Request) (*dispatch.Principal, *refusal, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && token != "" {
		p, err := a.admin.Authenticate(r.Context(), strings.TrimSpace(token))
		if err != nil || p != nil {
			return p, nil, err
		}
	}
	return nil, &refusal{status: http.StatusUnauthorized, challenge: true,
		detail: "give an API token as `Authorization: Bearer TOKEN` (`loanq token create` issues one); a revoked or expired token is refused"}, nil
}
