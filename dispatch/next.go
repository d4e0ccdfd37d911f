package dispatch

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// Next work across the tasks a user may work (docs/algorithm.md, "Next
// work"): the tasks in order (nextOrder), each asked in turn without
// waiting, as `work get --no-wait` would; a busy task is passed over while
// another has work, and the caller waits only when every task with work is
// busy. Each task serves its own request by the usual rules (§3 and §4):
// work next adds no way of handing out a loan, only the choice of task.

// Task orders of work next (--task-order).
const (
	// OrderPriority: higher --priority first, then the task that has
	// waited longest (oldestFirst).
	OrderPriority = "priority"
	// OrderOldest: the task that has waited longest first, then priority.
	OrderOldest = "oldest"
)

// StatusBusy is work next's status when no loan was handed out and a task
// that may have work stayed busy until the caller gave up (exit 75).
const StatusBusy = "busy"

// StatusSkipped is a task work next passed over because it cannot serve
// the caller (deleted meanwhile, stored criteria refused): said in Notice.
const StatusSkipped = "skipped"

// ParseTaskOrder reads --task-order ("" is OrderPriority).
func ParseTaskOrder(s string) (string, error) {
	switch s {
	case "", OrderPriority:
		return OrderPriority, nil
	case OrderOldest:
		return OrderOldest, nil
	}
	return "", problem.Paramf("--task-order", "task_order", "invalid %s %q: give priority (the task of higher priority first, then the task waiting longest) or oldest (the task waiting longest first)", s)
}

// NextOptions tune one work next.
type NextOptions struct {
	Order   string        // OrderPriority or OrderOldest ("": priority)
	NoWait  bool          // answer busy at once when every task with work is busy
	Timeout time.Duration // give up waiting for a busy task after this long (0: never)
	Backoff []time.Duration
	// CancelAs: as GetOptions'.
	CancelAs string
}

// NextTry is what one task answered a work next.
type NextTry struct {
	Task      string `json:"task"`
	RequestID int64  `json:"request_id,omitempty"`
	Status    string `json:"status"`
	Assigned  int    `json:"assigned"`
}

// NextAnswer is work next's answer (docs/json.md): the loans with the task
// each came from, and what each task tried answered, in order.
type NextAnswer struct {
	User      string     `json:"user"`
	Order     string     `json:"task_order"`
	Requested int        `json:"requested"`
	Assigned  int        `json:"assigned"`
	Status    string     `json:"status"`
	Tried     []NextTry  `json:"tried"`
	Work      []LoanItem `json:"work"`
	// Notice: as Request's (details that could not be read).
	Notice string `json:"-"`
}

// nextCandidate is a task work next may ask, with what orders it.
type nextCandidate struct {
	name     string
	priority int
	// waitingSince: when anyone last asked the task for work, or its
	// creation if nobody ever did. The task asked least recently comes
	// first among equals: its work has waited longest, and callers of
	// work next go round the tasks of one priority in turn.
	waitingSince time.Time
}

// nextTaskCandidates returns the tasks user may take work from, in no
// particular order (nextOrder sorts them): those whose allow list lets
// user in (task create --allow, docs/governance.md), so that work next
// never asks a task the user may not work.
func (e *Engine) nextTaskCandidates(ctx context.Context, user string) ([]nextCandidate, error) {
	rows, err := e.detailsSQL().NextCandidates.All(ctx, e.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("reading the tasks for work next: %w", err)
	}
	// Only the tasks user may work (governance.go): a task whose allow
	// list leaves user out is never asked, so it neither refuses the whole
	// call nor logs a request the database would refuse.
	workable, err := e.WorkableTasks(ctx, user)
	if err != nil {
		return nil, err
	}
	may := make(map[string]bool, len(workable))
	for _, t := range workable {
		may[t.Name] = true
	}
	out := make([]nextCandidate, 0, len(rows))
	for _, r := range rows {
		if !may[r.Name] {
			continue
		}
		since := r.LastAskedAt.T
		if since.IsZero() {
			since = r.CreatedAt.T
		}
		out = append(out, nextCandidate{name: r.Name, priority: int(r.Priority), waitingSince: since})
	}
	return out, nil
}

// nextOrder sorts the candidates for order: by priority (higher first),
// then waiting longest, or the other way round; the name breaks ties.
func nextOrder(c []nextCandidate, order string) {
	sort.SliceStable(c, func(i, j int) bool {
		a, b := c[i], c[j]
		byPriority := func() (bool, bool) { return a.priority > b.priority, a.priority != b.priority }
		byAge := func() (bool, bool) {
			return a.waitingSince.Before(b.waitingSince), !a.waitingSince.Equal(b.waitingSince)
		}
		first, second := byPriority, byAge
		if order == OrderOldest {
			first, second = byAge, byPriority
		}
		if less, differ := first(); differ {
			return less
		}
		if less, differ := second(); differ {
			return less
		}
		return a.name < b.name
	})
}

// Next is `work next`: up to count loans from the tasks user may work.
// A task answering busy is passed over (its request cancelled: nobody
// waits for it; if a holder served it first, its loans are taken); when
// no task handed out a loan and one was busy, the caller waits for the
// first busy task (woken by its holder's commit, at most one backoff
// step), then asks every task again, until --timeout. On a timeout or
// NoWait it returns the answer (status busy) with a problem.Busy error.
func (e *Engine) Next(ctx context.Context, user string, count int, opt NextOptions) (*NextAnswer, error) {
	if count < 1 || count > MaxCount {
		return nil, problem.Paramf("--count", "count", "invalid %s %d: ask for between 1 and %d loans", count, MaxCount)
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	order, err := ParseTaskOrder(opt.Order)
	if err != nil {
		return nil, err
	}
	backoff := opt.Backoff
	if len(backoff) == 0 {
		backoff = DefaultBackoff
	}
	var deadline time.Time
	if opt.Timeout > 0 {
		deadline = time.Now().Add(opt.Timeout)
	}
	ans := &NextAnswer{User: user, Order: order, Requested: count, Tried: []NextTry{}, Work: []LoanItem{}}
	for attempt := 0; ; attempt++ {
		cands, err := e.nextTaskCandidates(ctx, user)
		if err != nil {
			return nil, err
		}
		nextOrder(cands, order)
		var busy []string
		for _, c := range cands {
			if ans.Assigned >= count {
				break
			}
			req, err := e.Get(ctx, c.name, user, count-ans.Assigned, GetOptions{NoWait: true, Backoff: backoff, CancelAs: opt.CancelAs})
			req, err = e.passOver(ctx, req, err, user)
			if err != nil && problem.KindOf(err) == problem.Usage {
				// A task deleted since the list was read, or one that cannot
				// be served (its stored criteria refused): the others still
				// can; the answer says why this one was passed over.
				ans.Tried = append(ans.Tried, NextTry{Task: c.name, Status: StatusSkipped})
				ans.Notice = joinNotice(ans.Notice, err.Error())
				continue
			}
			if req != nil {
				ans.take(req)
			}
			if problem.KindOf(err) == problem.Busy {
				busy = append(busy, c.name)
				continue
			}
			if err != nil {
				return ans.done(), err // the loans taken so far are the caller's: answer them too
			}
		}
		if ans.Assigned > 0 || len(busy) == 0 {
			return ans.done(), nil
		}
		wait := backoff[min(attempt, len(backoff)-1)]
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		if opt.NoWait || wait <= 0 {
			ans.Status = StatusBusy
			return ans, &problem.Error{Kind: problem.Busy,
				Msg:  fmt.Sprintf("no loan handed out: task(s) %s may have work but another caller holds their lock", strings.Join(busy, ", ")),
				Hint: "ask again (`loanq work next`), or wait for one task with `loanq work get TASK`"}
		}
		// Every task with work is busy: wait for the first one's holder to
		// commit (Get's wait, at most one backoff step), then ask them all
		// again, as another may have freed first.
		req, err := e.Get(ctx, busy[0], user, count, GetOptions{Timeout: wait, Backoff: backoff, CancelAs: opt.CancelAs})
		req, err = e.passOver(ctx, req, err, user)
		if req != nil {
			ans.take(req)
		}
		if err != nil && problem.KindOf(err) != problem.Busy {
			return ans.done(), err
		}
		if ans.Assigned > 0 {
			return ans.done(), nil
		}
	}
}

// passOver cancels the request of a busy answer so that nobody's request
// stays pending for a task the caller moved past; if a holder served it
// first, the served request is returned (its loans are the caller's). A
// request Get attached to (the user's pending request of another call) is
// left alone: its caller waits for it.
func (e *Engine) passOver(ctx context.Context, req *Request, err error, user string) (*Request, error) {
	if problem.KindOf(err) != problem.Busy || req == nil || req.Status != StatusPending || req.Attached {
		return req, err
	}
	c, cerr := e.cancel(ctx, req.ID, user)
	if cerr != nil {
		return req, cerr
	}
	if c.Status == StatusCancelled {
		return c, err // still busy: nothing handed out
	}
	return e.withWork(ctx, nil, c), nil
}

// take adds a task's answer to ans.
func (a *NextAnswer) take(req *Request) {
	status := req.Status
	if status == StatusCancelled {
		status = StatusBusy
	}
	a.Tried = append(a.Tried, NextTry{Task: req.Task, RequestID: req.ID, Status: status, Assigned: req.Assigned})
	if status == StatusBusy || status == StatusPending {
		return
	}
	a.Work = append(a.Work, req.Work...)
	a.Assigned += len(req.Work)
	if req.Notice != "" {
		a.Notice = joinNotice(a.Notice, req.Notice)
	}
}

// done sets the answer's status from what it holds.
func (a *NextAnswer) done() *NextAnswer {
	switch {
	case a.Assigned == 0:
		a.Status = StatusEmpty
	case a.Assigned < a.Requested:
		a.Status = StatusPartial
	default:
		a.Status = StatusAssigned
	}
	return a
}
