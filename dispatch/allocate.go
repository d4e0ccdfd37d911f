package dispatch

// The allocation rule of a serving round (docs/algorithm.md, step 5), a pure
// function: no database, no clock. assign (assign.go) reads its inputs in
// the round's transaction and writes what it decides (commit.go).

// allocation is what a serving round shares out.
type allocation struct {
	pending []pendingRequest // the task's pending requests, oldest first
	loans   []string         // the candidates, in criteria order
	// exhausted: there is no eligible loan beyond loans (the criteria
	// query returned fewer rows than its limit), so a request they cannot
	// fill is answered partial or empty; otherwise it waits for a round
	// with a fresh query.
	exhausted bool
	maxActive int            // the task's per-user cap (--max-active); 0: none
	active    map[string]int // with maxActive: each pending user's active work before the round
	// skip: requests left out, their loans going to the next ones (a
	// request cancelled after the round read it).
	skip map[int64]bool
	// blocked: four eyes (governance.go): user → the candidates that user
	// worked in a task the task's --not-worked-in names. A request takes
	// the first candidates left that its user may have; the ones it passes
	// over stay for the next requests.
	blocked map[string]map[string]bool
	// refused: users who may no longer work the task (their allow entry
	// removed after they asked): their requests are answered empty.
	refused map[string]bool
}

// outcome is the answer of one request a round serves.
type outcome struct {
	request pendingRequest
	status  string   // StatusAssigned, StatusPartial or StatusEmpty (requestStatus)
	loans   []string // its loans, a part of the candidates
}

// allocationPlan is what a round does with its candidates.
type allocationPlan struct {
	served []outcome    // the requests answered, oldest first
	work   []assignment // their work rows: request after request, each in criteria order
	left   []string     // the candidates nobody got (a pool task refills its pool with them)
}

// underCap is how many of the requested loans a user holding active loans
// may take under the task's per-user cap (--max-active; 0: none). Every way
// of serving applies it: a round (planAllocation), a rows claim, a pool
// claim.
func underCap(requested, maxActive, active int) int {
	if maxActive <= 0 {
		return requested
	}
	return max(0, min(requested, maxActive-active))
}

// planAllocation serves the pending requests oldest first (FIFO), each from
// the front of what the earlier ones left, up to what it asked for and what
// its user's cap allows (the cap counts what this round already gave that
// user). It stops at the first request the candidates cannot fill unless
// they are exhausted: that request and the later ones stay pending, so a
// request is never answered partial or empty while eligible loans may
// remain, and no later request overtakes it.
//
// A request's answer depends only on the requests before it, never on the
// later ones: assign relies on this when it plans again without a request
// found cancelled (the answers before it stand).
func planAllocation(a allocation) allocationPlan {
	var p allocationPlan
	loans := a.loans
	given := map[string]int{} // this round's loans per user, for the cap
	for _, r := range a.pending {
		if a.skip[r.id] {
			continue
		}
		if a.refused[r.user] {
			p.served = append(p.served, outcome{request: r, status: requestStatus(r.requested, 0)})
			continue
		}
		allow := underCap(r.requested, a.maxActive, a.active[r.user]+given[r.user])
		mine, rest := pick(loans, allow, a.blocked[r.user])
		take := len(mine)
		if take < allow && !a.exhausted {
			break // more loans may exist: serve this one fully in the next round
		}
		p.served = append(p.served, outcome{request: r, status: requestStatus(r.requested, take), loans: mine})
		for _, loan := range mine {
			p.work = append(p.work, assignment{loan: loan, request: r.id, user: r.user})
		}
		loans = rest
		given[r.user] += take
	}
	p.left = loans
	return p
}

// pick takes up to n of loans from the front, passing over those in
// blocked (four eyes), and returns them and the loans left, both in order.
func pick(loans []string, n int, blocked map[string]bool) (mine, rest []string) {
	if len(blocked) == 0 {
		take := min(n, len(loans))
		return loans[:take:take], loans[take:]
	}
	rest = make([]string, 0, len(loans))
	for i, loan := range loans {
		if len(mine) == n {
			rest = append(rest, loans[i:]...)
			break
		}
		if blocked[loan] {
			rest = append(rest, loan)
			continue
		}
		mine = append(mine, loan)
	}
	return mine, rest
}

// fourEyesShort reports whether the candidates leave a request short only
// because of four eyes: planned as if more loans might exist, a request
// is not reached. The round then fetches more candidates (assign) instead
// of leaving it for a round that would find the same ones.
func fourEyesShort(pending []pendingRequest, loans []string, blocked map[string]map[string]bool) bool {
	if len(blocked) == 0 {
		return false
	}
	p := planAllocation(allocation{pending: pending, loans: loans, blocked: blocked})
	return len(p.served) < len(pending)
}
