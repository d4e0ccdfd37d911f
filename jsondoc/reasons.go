package jsondoc

import "github.com/loanq/loanq/dispatch"

// WithReasons adds a task's reason codes to its document (docs/reasons.md):
// reasons, an object of action → codes ({} when none), and require_reason,
// the actions that require one.
func WithReasons(m map[string]any, r dispatch.Reasons) map[string]any {
	codes := map[string][]string{}
	for a, c := range r.Codes {
		codes[a] = c
	}
	req := r.Required
	if req == nil {
		req = []string{}
	}
	m["reasons"], m["require_reason"] = codes, req
	return m
}
