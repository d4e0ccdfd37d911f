package web

import (
	"context"
	"net/http"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

// The tasks, and the supervisors' view of everyone's work: the task list,
// the work list and reclaim.

func (a *api) tasks(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	// A processor sees the tasks it may work (their allow lists,
	// docs/governance.md), as /work lists them; a supervisor every task.
	read := a.e.Tasks
	if !p.Supervisor() {
		read = func(ctx context.Context) ([]*dispatch.Task, error) { return a.e.WorkableTasks(ctx, p.User) }
	}
	ts, err := read(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	list := []map[string]any{}
	for _, t := range ts {
		// The codes a disposition may give (the processor's page offers
		// them): one read by key per task.
		reasons, err := a.admin.TaskReasons(r.Context(), t)
		if err != nil {
			a.fail(w, err)
			return
		}
		list = append(list, jsondoc.WithReasons(jsondoc.Task(t), reasons))
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"tasks": list})
}

// olderThan reads older_than: 0s or a positive duration.
func olderThan(v string) (time.Duration, error) {
	d, err := flagvalue.Duration("older_than", v)
	if err != nil || d < 0 {
		return 0, problem.Usagef("invalid older_than %q: give 0s or a positive duration such as 4h", v)
	}
	return d, nil
}

func (a *api) work(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	q := r.URL.Query()
	f := dispatch.WorkFilter{Task: q.Get("task"), User: q.Get("user")}
	if v := q.Get("older_than"); v != "" {
		d, err := olderThan(v)
		if err != nil {
			a.fail(w, err)
			return
		}
		f.OlderThan = d
	}
	items, err := a.admin.WorkList(r.Context(), f)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, map[string]any{"work": items})
}

func (a *api) reclaim(w http.ResponseWriter, r *http.Request, p *dispatch.Principal) {
	var body struct {
		Of        string `json:"of"`
		OlderThan string `json:"older_than"`
		DryRun    bool   `json:"dry_run"`
	}
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	var older time.Duration
	if body.OlderThan != "" {
		d, err := olderThan(body.OlderThan)
		if err != nil {
			a.fail(w, err)
			return
		}
		older = d
	}
	task := r.PathValue("task")
	items, err := a.e.Reclaim(r.Context(), task, p.User, body.Of, older, body.DryRun)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeDoc(w, http.StatusOK, jsondoc.Reclaim(task, p.User, body.DryRun, items))
}
