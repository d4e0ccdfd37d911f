package history

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Anomaly kinds: what Check found. Each is something no correct engine can
// produce from the history it was given.
const (
	// LoanActiveTwice: two loanq_work rows of one loan overlap in time
	// (assigned_at to disposed_at, or to the end when still active).
	LoanActiveTwice = "loan-active-twice"
	// LoanHeldTwice: two callers were told they had the loan at
	// overlapping times (from each get's completion to the invocation of
	// the holder's disposition of it).
	LoanHeldTwice = "loan-held-twice"
	// StaleHandOut: a get handed out a loan although a change that made the
	// loan stop matching had completed before the get was invoked (the
	// callers' clock).
	StaleHandOut = "stale-hand-out"
	// StaleAssignment: a loanq_work row of a loan was assigned (its
	// assigned_at) after a change that made the loan stop matching had
	// committed (the database clock read after that commit).
	StaleAssignment = "stale-assignment"
	// HandOutAfterNever: a get invoked after a `never` disposition of the
	// loan was acknowledged handed it out again.
	HandOutAfterNever = "hand-out-after-never"
	// AssignedAfterNever: a loanq_work row of a loan was assigned after the
	// loan's `never` disposition (database clock).
	AssignedAfterNever = "assigned-after-never"
	// RequestServedTwice: callers were told different loans for one
	// request.
	RequestServedTwice = "request-served-twice"
	// RequestMismatch: a request's work rows do not match its assigned
	// count, or a caller was told loans its request's rows do not hold, or
	// a request's answer went to a caller who is not its user.
	RequestMismatch = "request-mismatch"
	// RequestLeftPending: a request of a caller that was not killed is
	// still pending at the end.
	RequestLeftPending = "request-left-pending"
	// ServedAfterCancel: a request whose cancel was acknowledged as
	// cancelled was served.
	ServedAfterCancel = "served-after-cancel"
	// ServedToGoneCaller: a request was served to a caller whose process
	// had been gone for longer than Options.AbandonBound.
	ServedToGoneCaller = "served-to-gone-caller"
	// DispositionLost: an acknowledged disposition is not in the database.
	DispositionLost = "disposition-lost"
	// DispositionNotInvoked: the database holds more dispositions of a
	// caller's loan than the caller invoked.
	DispositionNotInvoked = "disposition-not-invoked"
	// EmptyWhileEligible: a get answered empty or partial while a loan was
	// eligible and unclaimed during the whole get.
	EmptyWhileEligible = "empty-while-eligible"
)

// Options tune Check.
type Options struct {
	// AbandonBound is the engine's bound on how long a request of a caller
	// that is gone may still be served; 0 turns ServedToGoneCaller off.
	AbandonBound time.Duration
	// Slack is a tolerance on every time comparison (clock resolution,
	// SQLite's milliseconds); 0: none.
	Slack time.Duration
	// MaxSlice bounds the operations an anomaly's slice shows (default 40).
	MaxSlice int
}

// Anomaly is one violation, with the shortest slice of the history that
// shows it: the operations touching its loan or request in the window of
// the operations involved, and the database rows involved.
type Anomaly struct {
	Kind    string
	Loan    string
	Request int64
	Msg     string
	Ops     []Op
	Rows    []Work
}

// Distance is how far from the top of the priority order handed-out loans
// came: for each loan a get handed out, how many better-ranked loans were
// eligible and unclaimed during the whole get and left to others.
type Distance struct {
	N                  int // loans measured (gets with database times)
	Top                int // loans with nothing better left
	P50, P90, P99, Max int
}

func (d Distance) String() string {
	if d.N == 0 {
		return "no loans measured"
	}
	return fmt.Sprintf("%d loans: %.0f%% from the top, p50 %d, p90 %d, p99 %d, max %d better loans left",
		d.N, 100*float64(d.Top)/float64(d.N), d.P50, d.P90, d.P99, d.Max)
}

// Result is what Check found.
type Result struct {
	Ops       int          // operations checked
	ByKind    map[Kind]int // of which, by kind
	Batched   int          // dispositions made in a call of several loans (Count > 1)
	ByType    map[Type]int // and by outcome
	HandedOut int          // loans callers were told they got
	WorkRows  int
	Requests  int
	Anomalies []Anomaly
	Distance  Distance
	base      time.Time // the first invoke: slices print times from it
	dbBase    time.Time
}

// Valid reports whether no anomaly was found.
func (r *Result) Valid() bool { return len(r.Anomalies) == 0 }

// Count is the number of anomalies of each kind.
func (r *Result) Count() map[string]int {
	out := map[string]int{}
	for _, a := range r.Anomalies {
		out[a.Kind]++
	}
	return out
}

// checker holds the history indexed.
type checker struct {
	ops  []Op
	st   State
	opt  Options
	res  *Result
	loan map[string][]int // ops touching a loan (Loan or Loans)
	req  map[int64][]int  // ops naming a request
	who  map[string][]int // ops of a caller
	work map[string][]Work
	byRq map[int64][]Work
	rq   map[int64]Request
	kill map[string]*Op // a killed caller's kill
	// changes of a loan, and dispositions
	changes map[string][]*Op
	never   map[string][]*Op // acknowledged never dispositions of a loan
}

// Check checks a history against the final state of the database.
func Check(ops []Op, st State, opt Options) *Result {
	if opt.MaxSlice <= 0 {
		opt.MaxSlice = 40
	}
	ops = slices.Clone(ops)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke.Before(ops[j].Invoke) })
	c := &checker{ops: ops, st: st, opt: opt,
		res:  &Result{Ops: len(ops), ByKind: map[Kind]int{}, ByType: map[Type]int{}, WorkRows: len(st.Work), Requests: len(st.Requests)},
		loan: map[string][]int{}, req: map[int64][]int{}, who: map[string][]int{}, work: map[string][]Work{}, byRq: map[int64][]Work{},
		rq: map[int64]Request{}, kill: map[string]*Op{}, changes: map[string][]*Op{}, never: map[string][]*Op{}}
	for i := range c.ops {
		op := &c.ops[i]
		op.Index = i
		c.res.ByKind[op.Kind]++
		if op.Kind == Dispose && op.Count > 1 {
			c.res.Batched++
		}
		c.res.ByType[op.Type]++
		if i == 0 || op.Invoke.Before(c.res.base) {
			c.res.base = op.Invoke
		}
		for _, t := range []time.Time{op.DBInvoke, op.DBComplete} {
			if !t.IsZero() && (c.res.dbBase.IsZero() || t.Before(c.res.dbBase)) {
				c.res.dbBase = t
			}
		}
		seen := map[string]bool{}
		for _, l := range append(slices.Clone(op.Loans), op.Loan) {
			if l != "" && !seen[l] {
				seen[l] = true
				c.loan[l] = append(c.loan[l], i)
			}
		}
		if op.Request != 0 {
			c.req[op.Request] = append(c.req[op.Request], i)
		}
		c.who[op.Caller] = append(c.who[op.Caller], i)
		switch op.Kind {
		case Kill:
			if k := c.kill[op.Caller]; k == nil || op.Invoke.Before(k.Invoke) {
				c.kill[op.Caller] = op
			}
		case Change:
			c.changes[op.Loan] = append(c.changes[op.Loan], op)
		case Dispose:
			if op.Action == "never" && op.Type == OK {
				c.never[op.Loan] = append(c.never[op.Loan], op)
			}
		case Get, Cancel:
			if op.Type == OK {
				c.res.HandedOut += len(op.Loans)
			}
		}
	}
	for _, w := range st.Work {
		c.work[w.Loan] = append(c.work[w.Loan], w)
		c.byRq[w.RequestID] = append(c.byRq[w.RequestID], w)
		if c.res.dbBase.IsZero() || w.AssignedAt.Before(c.res.dbBase) {
			c.res.dbBase = w.AssignedAt
		}
	}
	for l := range c.work {
		ws := c.work[l]
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].AssignedAt.Before(ws[j].AssignedAt) })
	}
	for _, r := range st.Requests {
		c.rq[r.ID] = r
	}

	c.activeTwice()
	c.heldTwice()
	c.stale()
	c.requests()
	c.dispositions()
	c.emptyAndDistance()
	return c.res
}

func (c *checker) add(a Anomaly) { c.res.Anomalies = append(c.res.Anomalies, a) }

// after reports whether a is after b by more than the slack.
func (c *checker) after(a, b time.Time) bool { return a.Sub(b) > c.opt.Slack }

// interval is a stretch of time a loan was held or active.
type interval struct {
	from, to time.Time
	op       int // the op that handed it out (-1: none)
	work     *Work
}

// overlaps sweeps intervals sorted by start and returns the first pair
// that overlaps by more than the slack.
func (c *checker) overlaps(iv []interval) (a, b interval, found bool) {
	sort.SliceStable(iv, func(i, j int) bool { return iv[i].from.Before(iv[j].from) })
	for i := 1; i < len(iv); i++ {
		for j := 0; j < i; j++ {
			if c.after(iv[j].to, iv[i].from) {
				return iv[j], iv[i], true
			}
		}
	}
	return interval{}, interval{}, false
}

// activeTwice: the database's own record of each loan.
func (c *checker) activeTwice() {
	for _, loan := range sortedKeys(c.work) {
		var iv []interval
		for i := range c.work[loan] {
			w := &c.work[loan][i]
			to := forever
			if w.Disposition != "" {
				to = w.DisposedAt
			}
			iv = append(iv, interval{from: w.AssignedAt, to: to, op: -1, work: w})
		}
		if a, b, ok := c.overlaps(iv); ok {
			c.add(c.rowsAnomaly(LoanActiveTwice, loan, 0, fmt.Sprintf("loan %s has two work rows active at once: assigned to %s (request %d) at %s and to %s (request %d) at %s, before the first ended (%s)",
				loan, a.work.User, a.work.RequestID, c.dbTime(a.work.AssignedAt), b.work.User, b.work.RequestID, c.dbTime(b.work.AssignedAt), c.dbEnd(a.work)), *a.work, *b.work))
		}
	}
}

// heldTwice: what callers were told. A caller surely holds a loan from its
// get's completion until it invokes its disposition of it (or is killed).
func (c *checker) heldTwice() {
	held := map[string][]interval{}
	type key struct {
		req  int64
		loan string
	}
	seen := map[key]bool{}
	for i := range c.ops {
		op := &c.ops[i]
		if (op.Kind != Get && op.Kind != Cancel) || op.Type != OK || !op.completed() {
			continue
		}
		for n, l := range op.Loans {
			if slices.Contains(op.Loans[:n], l) {
				c.add(c.opsAnomaly(LoanHeldTwice, l, op.Request, fmt.Sprintf("loan %s appears twice in one answer (request %d)", l, op.Request), i))
				continue
			}
			if op.Request != 0 {
				if seen[key{op.Request, l}] {
					continue // the same request's answer read again (attach, status)
				}
				seen[key{op.Request, l}] = true
			}
			to := forever
			for _, j := range c.loan[l] {
				d := &c.ops[j]
				if d.Kind == Dispose && d.Caller == op.Caller && !d.Invoke.Before(op.Complete) {
					to = d.Invoke
					break
				}
			}
			if k := c.kill[op.Caller]; k != nil && k.Invoke.Before(to) {
				to = k.Invoke
			}
			held[l] = append(held[l], interval{from: op.Complete, to: to, op: i})
		}
	}
	for _, loan := range sortedKeys(held) {
		if a, b, ok := c.overlaps(held[loan]); ok {
			oa, ob := &c.ops[a.op], &c.ops[b.op]
			c.add(c.opsAnomaly(LoanHeldTwice, loan, 0, fmt.Sprintf("loan %s was held by %s (op #%d, request %d) and by %s (op #%d, request %d) at the same time",
				loan, oa.Caller, oa.Index, oa.Request, ob.Caller, ob.Index, ob.Request), a.op, b.op))
		}
	}
}

// rematched reports whether a change making the loan match again may come
// between x and the time t (client clock) — then a hand-out after x is not
// stale.
func (c *checker) rematched(loan string, x *Op, before func(y *Op) bool) bool {
	for _, y := range c.changes[loan] {
		if y.Matches && y != x && before(y) && (!y.completed() || y.Complete.After(x.Invoke)) {
			return true
		}
	}
	return false
}

// stale: no loan handed out after it stopped matching, or after never.
func (c *checker) stale() {
	reported := map[string]bool{}
	once := func(kind, loan string) bool {
		k := kind + "\x00" + loan
		if reported[k] {
			return false
		}
		reported[k] = true
		return true
	}
	// The callers' clock: the get was invoked after the change completed.
	for i := range c.ops {
		g := &c.ops[i]
		if (g.Kind != Get && g.Kind != Cancel) || g.Type != OK {
			continue
		}
		h := c.handOutStart(g)
		for _, l := range g.Loans {
			for _, x := range c.changes[l] {
				if x.Matches || x.Type != OK || !x.completed() || !c.after(h.Invoke, x.Complete) {
					continue
				}
				if c.rematched(l, x, func(y *Op) bool { return y.Invoke.Before(g.end()) }) {
					continue
				}
				if once(StaleHandOut, l) {
					c.add(c.opsAnomaly(StaleHandOut, l, g.Request, fmt.Sprintf("loan %s handed out to %s (op #%d, request %d, invoked %s) after %s's change (op #%d) that made it stop matching had completed (%s)",
						l, g.Caller, g.Index, g.Request, c.clientTime(h.Invoke), x.Caller, x.Index, c.clientTime(x.Complete)), c.with(c.holderGet(x), x.Index, h.Index, i)...))
				}
			}
			for _, n := range c.never[l] {
				if c.after(h.Invoke, n.Complete) && once(HandOutAfterNever, l) {
					c.add(c.opsAnomaly(HandOutAfterNever, l, g.Request, fmt.Sprintf("loan %s handed out to %s (op #%d, request %d) after %s's never disposition of it was acknowledged (op #%d)",
						l, g.Caller, g.Index, g.Request, n.Caller, n.Index), c.with(c.holderGet(n), n.Index, h.Index, i)...))
				}
			}
		}
	}
	// The database clock: the work row was assigned after the change's
	// commit, or after the loan's never row.
	for _, l := range sortedKeys(c.work) {
		rows := c.work[l]
		for wi := range rows {
			w := &rows[wi]
			for _, x := range c.changes[l] {
				if x.Matches || x.Type != OK || x.DBComplete.IsZero() || !c.after(w.AssignedAt, x.DBComplete) {
					continue
				}
				if c.rematched(l, x, func(y *Op) bool { return y.DBInvoke.IsZero() || y.DBInvoke.Before(w.AssignedAt) }) {
					continue
				}
				if once(StaleAssignment, l) {
					a := c.rowsAnomaly(StaleAssignment, l, w.RequestID, fmt.Sprintf("loan %s assigned to %s (request %d) at %s, after %s's change that made it stop matching had committed (op #%d, committed by %s)",
						l, w.User, w.RequestID, c.dbTime(w.AssignedAt), x.Caller, x.Index, c.dbTime(x.DBComplete)), *w)
					a.Ops = c.slice(l, w.RequestID, c.with(c.holderGet(x), append(c.opsOfRows(*w), x.Index)...))
					c.add(a)
				}
			}
			for _, n := range rows {
				if n.Disposition == "never" && n.ID != w.ID && c.after(w.AssignedAt, n.DisposedAt) && once(AssignedAfterNever, l) {
					c.add(c.rowsAnomaly(AssignedAfterNever, l, w.RequestID, fmt.Sprintf("loan %s assigned to %s (request %d) at %s, after %s's never disposition of it at %s",
						l, w.User, w.RequestID, c.dbTime(w.AssignedAt), n.User, c.dbTime(n.DisposedAt)), n, *w))
				}
			}
		}
	}
}

// holderGet is the get that gave op's caller op's loan last before op
// (-1: none).
func (c *checker) holderGet(op *Op) int {
	found := -1
	for _, j := range c.loan[op.Loan] {
		g := &c.ops[j]
		if (g.Kind == Get || g.Kind == Cancel) && g.Type == OK && g.Caller == op.Caller && g.completed() && g.Complete.Before(op.Invoke) {
			found = j
		}
	}
	return found
}

// with adds j to the list unless it is -1.
func (c *checker) with(j int, list ...int) []int {
	if j >= 0 {
		list = append(list, j)
	}
	return list
}

// handOutStart is the operation a hand-out began with: for an answer
// read by a later status or cancel, the get that logged its request.
func (c *checker) handOutStart(g *Op) *Op {
	if g.Request != 0 {
		for _, j := range c.req[g.Request] {
			if c.ops[j].Kind == Get {
				return &c.ops[j]
			}
		}
	}
	return g
}

// served reports whether a request status is an answer (not pending, not
// cancelled).
func served(status string) bool {
	return status == "assigned" || status == "partial" || status == "empty"
}

// requests: served once, matching its rows, not left pending, not served
// after its cancel or to a caller long gone.
func (c *checker) requests() {
	told := map[int64][]int{} // request → ops that reported its answer
	for i := range c.ops {
		op := &c.ops[i]
		if (op.Kind == Get || op.Kind == Cancel) && op.Type == OK && op.Request != 0 && served(op.Status) {
			told[op.Request] = append(told[op.Request], i)
		}
	}
	for _, id := range sortedKeys(told) {
		idx := told[id]
		first := sortedCopy(c.ops[idx[0]].Loans)
		for _, j := range idx[1:] {
			if got := sortedCopy(c.ops[j].Loans); !slices.Equal(got, first) {
				c.add(c.opsAnomaly(RequestServedTwice, "", id, fmt.Sprintf("request %d answered %v to op #%d and %v to op #%d", id, first, idx[0], got, j), idx[0], j))
				break
			}
		}
		r, ok := c.rq[id]
		if !ok {
			c.add(c.opsAnomaly(RequestMismatch, "", id, fmt.Sprintf("request %d was answered (op #%d) but is not in the database", id, idx[0]), idx...))
			continue
		}
		rows := c.byRq[id]
		var have []string
		for _, w := range rows {
			have = append(have, w.Loan)
		}
		for _, j := range idx {
			op := &c.ops[j]
			if op.Caller != r.User {
				c.add(c.opsAnomaly(RequestMismatch, "", id, fmt.Sprintf("request %d is %s's but its answer went to %s (op #%d)", id, r.User, op.Caller, j), j))
				break
			}
			var missing []string
			for _, l := range op.Loans {
				if !slices.Contains(have, l) {
					missing = append(missing, l)
				}
			}
			if len(missing) > 0 || len(op.Loans) != r.Assigned {
				a := c.opsAnomaly(RequestMismatch, "", id, fmt.Sprintf("request %d: op #%d was told %d loans %v, the database has %d assigned with work rows %v (not there: %v)",
					id, j, len(op.Loans), op.Loans, r.Assigned, have, missing), j)
				a.Rows = rows
				c.add(a)
				break
			}
		}
	}
	for _, r := range c.st.Requests {
		rows := c.byRq[r.ID]
		if len(rows) != r.Assigned {
			a := c.opsAnomaly(RequestMismatch, "", r.ID, fmt.Sprintf("request %d (%s, %s) has assigned %d but %d work rows", r.ID, r.User, r.Status, r.Assigned, len(rows)), c.req[r.ID]...)
			a.Rows = rows
			c.add(a)
		}
		kill := c.kill[r.User]
		if r.Status == "pending" && kill == nil {
			named := c.req[r.ID]
			if len(named) == 0 { // no answer named it: the caller's last operations
				named = c.who[r.User][max(0, len(c.who[r.User])-5):]
			}
			c.add(c.opsAnomaly(RequestLeftPending, "", r.ID, fmt.Sprintf("request %d of %s is still pending at the end, and its caller was not killed", r.ID, r.User), named...))
		}
		if c.opt.AbandonBound > 0 && kill != nil && r.Assigned > 0 && !r.ServedAt.IsZero() {
			gone := kill.DBComplete
			if gone.IsZero() {
				gone = kill.DBInvoke
			}
			if !gone.IsZero() && c.after(r.ServedAt, gone.Add(c.opt.AbandonBound)) {
				a := c.opsAnomaly(ServedToGoneCaller, "", r.ID, fmt.Sprintf("request %d of %s was served %d loans at %s, %s after its caller's process was killed (op #%d), past the abandoned-request bound %s",
					r.ID, r.User, r.Assigned, c.dbTime(r.ServedAt), r.ServedAt.Sub(gone).Round(time.Millisecond), kill.Index, c.opt.AbandonBound), append(c.req[r.ID], kill.Index)...)
				a.Rows = rows
				c.add(a)
			}
		}
	}
	for i := range c.ops {
		op := &c.ops[i]
		if op.Kind != Cancel || op.Type != OK || op.Status != "cancelled" {
			continue
		}
		r, ok := c.rq[op.Request]
		rows := c.byRq[op.Request]
		var toldLoans []int
		for _, j := range told[op.Request] {
			if len(c.ops[j].Loans) > 0 {
				toldLoans = append(toldLoans, j)
			}
		}
		if (ok && r.Status != "cancelled") || len(rows) > 0 || len(toldLoans) > 0 {
			a := c.opsAnomaly(ServedAfterCancel, "", op.Request, fmt.Sprintf("request %d was cancelled (op #%d acknowledged it) but is %s in the database with %d work rows, and %d answers gave its loans",
				op.Request, i, r.Status, len(rows), len(toldLoans)), append(toldLoans, i)...)
			a.Rows = rows
			c.add(a)
		}
	}
}

// dispositions: each acknowledged one is in the database exactly once.
func (c *checker) dispositions() {
	type key struct{ user, loan, action string }
	acked, maybe := map[key][]int{}, map[key][]int{}
	for i := range c.ops {
		op := &c.ops[i]
		if op.Kind != Dispose {
			continue
		}
		k := key{op.Caller, op.Loan, op.Action}
		switch op.Type {
		case OK:
			acked[k] = append(acked[k], i)
		case Info:
			maybe[k] = append(maybe[k], i)
		}
	}
	rows := map[key][]Work{}
	for _, w := range c.st.Work {
		switch w.Disposition {
		case "complete", "return", "never":
			k := key{w.User, w.Loan, w.Disposition}
			rows[k] = append(rows[k], w)
		}
	}
	keys := map[key]bool{}
	for k := range acked {
		keys[k] = true
	}
	for k := range rows {
		keys[k] = true
	}
	sorted := make([]key, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		return a.loan < b.loan || a.loan == b.loan && (a.user < b.user || a.user == b.user && a.action < b.action)
	})
	for _, k := range sorted {
		n, ok, may := len(rows[k]), len(acked[k]), len(maybe[k])
		switch {
		case n < ok:
			a := c.opsAnomaly(DispositionLost, k.loan, 0, fmt.Sprintf("%s's %s disposition of loan %s was acknowledged %d times, the database holds %d", k.user, k.action, k.loan, ok, n), append(acked[k], maybe[k]...)...)
			a.Rows = rows[k]
			c.add(a)
		case n > ok+may:
			a := c.opsAnomaly(DispositionNotInvoked, k.loan, 0, fmt.Sprintf("the database holds %d %s dispositions of loan %s by %s, who invoked %d (%d acknowledged)", n, k.action, k.loan, k.user, ok+may, ok), append(acked[k], maybe[k]...)...)
			a.Rows = rows[k]
			c.add(a)
		}
	}
}

// loanFacts are what the eligibility test needs of a loan.
type loanFacts struct {
	l           Loan
	firstChange time.Time // earliest invoke of a change of it (zero: none)
	work        []Work
}

// surelyEligible reports whether the loan was eligible and unclaimed during
// the whole of op g: it matched at the start and nothing changed it before
// g completed, no work row of it overlaps g's database window, it had no
// never before the window's end and no return time still ahead at its start.
func (c *checker) surelyEligible(f *loanFacts, end, dbFrom, dbTo time.Time) bool {
	if !f.l.MatchedAtStart || (!f.firstChange.IsZero() && !c.after(f.firstChange, end)) {
		return false
	}
	from, to := dbFrom.Add(-c.opt.Slack), dbTo.Add(c.opt.Slack)
	for _, w := range f.work {
		if w.AssignedAt.After(to) {
			continue
		}
		switch {
		case w.Disposition == "" || !w.DisposedAt.Before(from):
			return false // active during the window
		case w.Disposition == "never":
			return false
		case w.Disposition == "return" && w.ReturnAt.After(from):
			return false
		}
	}
	return true
}

// emptyAndDistance: an empty or partial answer only when nothing eligible
// was left unclaimed; and the distance from the top of each hand-out.
func (c *checker) emptyAndDistance() {
	facts := make([]loanFacts, len(c.st.Loans))
	for i, l := range c.st.Loans {
		f := loanFacts{l: l, work: c.work[l.Key]}
		for _, x := range c.changes[l.Key] {
			if f.firstChange.IsZero() || x.Invoke.Before(f.firstChange) {
				f.firstChange = x.Invoke
			}
		}
		facts[i] = f
	}
	sort.SliceStable(facts, func(i, j int) bool { return facts[i].l.Rank < facts[j].l.Rank })
	rank := map[string]int{}
	for _, f := range facts {
		rank[f.l.Key] = f.l.Rank
	}
	var dist []int
	for i := range c.ops {
		g := &c.ops[i]
		if g.Kind != Get || g.Type != OK || g.DBInvoke.IsZero() || g.DBComplete.IsZero() || !served(g.Status) {
			continue
		}
		short := g.Status == "empty" || g.Status == "partial"
		if !short && len(g.Loans) == 0 {
			continue
		}
		// The request may have been answered before this op (a status
		// read of it): the window starts at the get that logged it.
		dbFrom := g.DBInvoke
		if h := c.handOutStart(g); !h.DBInvoke.IsZero() && h.DBInvoke.Before(dbFrom) {
			dbFrom = h.DBInvoke
		}
		var free []int // ranks of loans eligible throughout g and not g's own
		var firstFree string
		for k := range facts {
			f := &facts[k]
			if slices.Contains(g.Loans, f.l.Key) || !c.surelyEligible(f, g.end(), dbFrom, g.DBComplete) {
				continue
			}
			if firstFree == "" {
				firstFree = f.l.Key
			}
			free = append(free, f.l.Rank)
		}
		if short && len(free) > 0 {
			a := c.opsAnomaly(EmptyWhileEligible, firstFree, g.Request, fmt.Sprintf("%s's get (op #%d, request %d) answered %s with %d of %d loans while %d loans were eligible and unclaimed throughout it, e.g. %s",
				g.Caller, i, g.Request, g.Status, len(g.Loans), g.Count, len(free), firstFree), i)
			a.Rows = c.work[firstFree]
			c.add(a)
		}
		for _, l := range g.Loans {
			r, ok := rank[l]
			if !ok {
				continue
			}
			dist = append(dist, sort.SearchInts(free, r))
		}
	}
	slices.Sort(dist)
	d := Distance{N: len(dist)}
	if len(dist) > 0 {
		pct := func(p int) int { return dist[min(len(dist)-1, (p*len(dist)+99)/100-1)] }
		d.P50, d.P90, d.P99, d.Max = pct(50), pct(90), pct(99), dist[len(dist)-1]
		for _, x := range dist {
			if x == 0 {
				d.Top++
			}
		}
	}
	c.res.Distance = d
}

// opsOfRows finds the operations behind work rows: the answers of their
// requests and their users' dispositions of their loans.
func (c *checker) opsOfRows(rows ...Work) []int {
	var out []int
	for _, w := range rows {
		out = append(out, c.req[w.RequestID]...)
		for _, j := range c.loan[w.Loan] {
			if op := &c.ops[j]; op.Kind == Dispose && op.Caller == w.User {
				out = append(out, j)
			}
		}
	}
	return out
}

func (c *checker) rowsAnomaly(kind, loan string, request int64, msg string, rows ...Work) Anomaly {
	return Anomaly{Kind: kind, Loan: loan, Request: request, Msg: msg, Rows: rows, Ops: c.slice(loan, request, c.opsOfRows(rows...))}
}

func (c *checker) opsAnomaly(kind, loan string, request int64, msg string, named ...int) Anomaly {
	return Anomaly{Kind: kind, Loan: loan, Request: request, Msg: msg, Ops: c.slice(loan, request, named)}
}

// slice is the shortest piece of history that shows an anomaly: the named
// operations and every operation touching the loan or the request between
// the first of them and the last (all of them when none is named).
func (c *checker) slice(loan string, request int64, named []int) []Op {
	from, to := forever, time.Time{}
	for _, j := range named {
		op := &c.ops[j]
		if op.Invoke.Before(from) {
			from = op.Invoke
		}
		if e := op.end(); e.After(to) && e != forever {
			to = e
		} else if op.Invoke.After(to) {
			to = op.Invoke
		}
	}
	if len(named) == 0 {
		from, to = time.Time{}, forever
	}
	pick := map[int]bool{}
	for _, j := range named {
		pick[j] = true
	}
	var around []int
	if loan != "" {
		around = append(around, c.loan[loan]...)
	}
	if request != 0 {
		around = append(around, c.req[request]...)
	}
	for _, j := range around {
		op := &c.ops[j]
		if !op.Invoke.After(to) && !op.end().Before(from) {
			pick[j] = true
		}
	}
	idx := make([]int, 0, len(pick))
	for j := range pick {
		idx = append(idx, j)
	}
	slices.Sort(idx)
	if len(idx) > c.opt.MaxSlice {
		keep := idx[:0]
		for k, j := range idx {
			if slices.Contains(named, j) || k < c.opt.MaxSlice/2 || k >= len(idx)-c.opt.MaxSlice/2 {
				keep = append(keep, j)
			}
		}
		idx = keep
	}
	out := make([]Op, len(idx))
	for k, j := range idx {
		out[k] = c.ops[j]
	}
	return out
}

func (c *checker) clientTime(t time.Time) string { return rel(t, c.res.base) }
func (c *checker) dbTime(t time.Time) string     { return "db " + rel(t, c.res.dbBase) }
func (c *checker) dbEnd(w *Work) string {
	if w.Disposition == "" {
		return "still active"
	}
	return w.Disposition + " at " + c.dbTime(w.DisposedAt)
}

func rel(t, base time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t == forever {
		return "end"
	}
	return fmt.Sprintf("+%.3fs", t.Sub(base).Seconds())
}

func sortedKeys[K string | int64, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// Report prints the result: counts, the distance, and every anomaly with
// its slice of history.
func (r *Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations checked (", r.Ops)
	for i, k := range []Kind{Get, Dispose, Change, Cancel, Kill} {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", r.ByKind[k], k)
		if k == Dispose && r.Batched > 0 {
			fmt.Fprintf(&b, " (%d in batches)", r.Batched)
		}
	}
	fmt.Fprintf(&b, "; %d ok, %d fail, %d info), %d loans handed out, %d work rows, %d requests\n",
		r.ByType[OK], r.ByType[Fail], r.ByType[Info], r.HandedOut, r.WorkRows, r.Requests)
	fmt.Fprintf(&b, "distance from the top of the priority order: %s\n", r.Distance)
	if r.Valid() {
		b.WriteString("no anomalies\n")
		return b.String()
	}
	counts := r.Count()
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	b.WriteString("ANOMALIES:")
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s %d", k, counts[k])
	}
	b.WriteString("\n")
	for i, a := range r.Anomalies {
		fmt.Fprintf(&b, "\n[%d] %s: %s\n", i+1, a.Kind, a.Msg)
		for _, op := range a.Ops {
			fmt.Fprintf(&b, "    %s\n", r.FormatOp(op, a.Loan))
		}
		for _, w := range a.Rows {
			fmt.Fprintf(&b, "    %s\n", r.FormatWork(w))
		}
	}
	return b.String()
}

// FormatOp prints one operation on one line; mark is a loan to point out
// in a long list of loans.
func (r *Result) FormatOp(op Op, mark string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%-5d %-14s %s..%s", op.Index, op.Caller, rel(op.Invoke, r.base), rel(op.Complete, r.base))
	if !op.DBInvoke.IsZero() || !op.DBComplete.IsZero() {
		fmt.Fprintf(&b, " (db %s..%s)", rel(op.DBInvoke, r.dbBase), rel(op.DBComplete, r.dbBase))
	}
	fmt.Fprintf(&b, " %s", op.Kind)
	switch op.Kind {
	case Get:
		if op.Count > 0 {
			fmt.Fprintf(&b, " n=%d", op.Count)
		}
	case Dispose:
		fmt.Fprintf(&b, " %s %s", op.Loan, op.Action)
		if op.Count > 1 {
			fmt.Fprintf(&b, " (one call for %d loans)", op.Count)
		}
		if op.Action == "return" {
			fmt.Fprintf(&b, " --after %s", op.After)
		}
	case Change:
		fmt.Fprintf(&b, " %s matches=%t", op.Loan, op.Matches)
	}
	fmt.Fprintf(&b, " -> %s", op.Type)
	if op.Request != 0 {
		fmt.Fprintf(&b, " req %d", op.Request)
	}
	if op.Status != "" {
		fmt.Fprintf(&b, " %s", op.Status)
	}
	if len(op.Loans) > 0 {
		if len(op.Loans) <= 8 {
			fmt.Fprintf(&b, " %v", op.Loans)
		} else {
			fmt.Fprintf(&b, " [%s … %d loans", strings.Join(op.Loans[:4], " "), len(op.Loans))
			if mark != "" && slices.Contains(op.Loans, mark) {
				fmt.Fprintf(&b, ", incl. %s", mark)
			}
			b.WriteString("]")
		}
	}
	if op.Err != "" {
		e := op.Err
		if len(e) > 160 {
			e = e[:160] + "…"
		}
		fmt.Fprintf(&b, " err: %s", e)
	}
	if op.Process != "" || op.Via != "" {
		fmt.Fprintf(&b, " [%s %s]", op.Process, op.Via)
	}
	return b.String()
}

// FormatWork prints a work row on one line.
func (r *Result) FormatWork(w Work) string {
	s := fmt.Sprintf("work row %d: loan %s to %s, request %d, assigned db %s", w.ID, w.Loan, w.User, w.RequestID, rel(w.AssignedAt, r.dbBase))
	if w.Disposition == "" {
		return s + ", active"
	}
	s += fmt.Sprintf(", %s db %s", w.Disposition, rel(w.DisposedAt, r.dbBase))
	if !w.ReturnAt.IsZero() {
		s += fmt.Sprintf(" (back at db %s)", rel(w.ReturnAt, r.dbBase))
	}
	return s
}
