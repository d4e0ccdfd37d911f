package web

import (
	"net/http"

	"github.com/loanq/loanq/dispatch"
)

// POST /api/v1/next: the next work across every task the caller may work
// (dispatch.Engine.Next, `loanq work next`). A busy answer (every task with
// work held by another caller for the whole wait) is 503 with Retry-After
// (problem.go), as there is no request to follow: ask again.
func (a *api) next(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body struct {
		askBody
		TaskOrder string `json:"task_order"`
	}
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	count, wait, err := body.parse()
	if err != nil {
		a.fail(w, err)
		return
	}
	order, err := dispatch.ParseTaskOrder(body.TaskOrder)
	if err != nil {
		a.fail(w, err)
		return
	}
	// A client gone while it waits: the request being waited for is
	// cancelled, as for POST …/requests.
	ans, err := a.e.Next(r.Context(), p.User, count, dispatch.NextOptions{Order: order, NoWait: wait == 0, Timeout: wait,
		Backoff: apiBackoff, CancelAs: p.User})
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, ans)
}
