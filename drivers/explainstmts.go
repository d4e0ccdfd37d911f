package drivers

import (
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
)

// ShownStatement is one statement of a get as `loanq explain` shows it: its
// purpose, its text as the database receives it, and its binds in order
// (USER, HOLDER, [KEYS] stand for values known only at run time).
type ShownStatement struct {
	Purpose string
	SQL     string
	Binds   []any
}

// GetShape is what of a task decides the statements of one get.
type GetShape struct {
	TaskID     int64
	Count      int
	Capped     bool // --max-active
	LeaseTTLMS int64
}

// GetStatements lists the statements one get of a task sends that decide
// its locks — the task lock, and the criteria query or the rows claim — and
// the index of the one that reads the source (the one to EXPLAIN), or -1.
func GetStatements(d Driver, strategy Strategy, src CriteriaSource, g GetShape) ([]ShownStatement, int) {
	st := d.Statements()
	crit := CriteriaQuery(d.Dialect(), src)
	critStmt := ShownStatement{Purpose: "criteria query: the eligible loans in priority order, locking nothing (the task lock serialises its callers)",
		SQL: crit.Text(), Binds: crit.Args(engineio.CriteriaParams{TaskID: g.TaskID, Limit: g.Count})}
	switch strategy {
	case Rows:
		rl, ok := d.(RowLocker)
		if !ok {
			return []ShownStatement{critStmt}, 0
		}
		var out []ShownStatement
		if g.Capped {
			out = append(out, ShownStatement{Purpose: "per-user cap: lock the caller's (task, user) row first",
				SQL: st.UserLock.Text(), Binds: st.UserLock.Args(engineio.TaskUserParams{TaskID: g.TaskID, User: "USER"})})
		}
		out = append(out, ShownStatement{Purpose: fmt.Sprintf("claim: lock up to %d eligible rows of %s, skipping rows other claimers hold", g.Count, src.Source),
			SQL: rl.RowsClaimSQL(src), Binds: []any{g.TaskID, g.Count}})
		if fc, ok := d.(FinishingClaimer); ok {
			claim := fc.FinishingClaim(src)
			out = append(out, ShownStatement{Purpose: "assign and finish: insert the locked rows that are still eligible, finish the request, log the run and return the answer (one statement)",
				SQL: claim.Text(), Binds: claim.Args(engineio.FinishingClaimParams{TaskID: g.TaskID, User: "USER", RequestID: 0, IDs: "[KEYS]",
					Assigned: g.Count, Status: "assigned", Holder: "HOLDER"})})
		} else {
			claim := CriteriaClaim(d.Dialect(), src)
			out = append(out, ShownStatement{Purpose: "assign: insert the locked rows that are still eligible",
				SQL: claim.Text(), Binds: claim.Args(engineio.ClaimParams{TaskID: g.TaskID, User: "USER", RequestID: 0, IDs: "[KEYS]"})})
		}
		return out, len(out) - 2
	case Lease:
		return []ShownStatement{{Purpose: "task lock: take the lease (an UPDATE of the task's lease row; no transaction is held while the query runs)",
			SQL: st.LeaseAcquire.Text(), Binds: st.LeaseAcquire.Args(engineio.LeaseTakeParams{TaskID: g.TaskID, Owner: "HOLDER", TTLMS: g.LeaseTTLMS})}, critStmt}, 1
	default:
		s := st.Lock(strategy)
		if s == nil || !d.Capabilities().Supports(strategy) {
			return []ShownStatement{critStmt}, 0
		}
		return []ShownStatement{{Purpose: "task lock: lock the task's row in loanq_task (" + string(strategy) + ")",
			SQL: s.Text(), Binds: s.Args(engineio.TaskParams{TaskID: g.TaskID})}, critStmt}, 1
	}
}

// ShowQuery is q as explain shows it with the binds p: for a statement of
// a feature's catalogue that one get also sends (a four-eyes round's read),
// so that the engine lists it without handling statement text itself.
func ShowQuery[P, R any](purpose string, q *Query[P, R], p P) ShownStatement {
	return ShownStatement{Purpose: purpose, SQL: q.Text(), Binds: q.Args(p)}
}
