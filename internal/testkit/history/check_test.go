package history

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Hand-written histories: for each rule, one that keeps it (no anomaly at
// all) and one that breaks it (that anomaly). Times are milliseconds from
// t0; the database clock is the callers' clock here.

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// hb builds a history and the database state it leaves, consistently.
type hb struct {
	ops  []Op
	st   State
	next int64
}

func newHB(loans int) *hb {
	h := &hb{}
	for i := 1; i <= loans; i++ {
		h.st.Loans = append(h.st.Loans, Loan{Key: fmt.Sprint(i), Rank: i - 1, MatchedAtStart: true, Matches: true})
	}
	h.st.Read = at(100000)
	return h
}

// get: caller asks for count, invoked at inv, completed at comp, and is
// served loans at the midpoint (work rows, a request).
func (h *hb) get(caller string, count, inv, comp int, loans ...string) *Op {
	h.next++
	status := "assigned"
	switch {
	case len(loans) == 0:
		status = "empty"
	case len(loans) < count:
		status = "partial"
	}
	mid := at((inv + comp) / 2)
	h.st.Requests = append(h.st.Requests, Request{ID: h.next, User: caller, Status: status, Requested: count, Assigned: len(loans), CreatedAt: at(inv), ServedAt: mid})
	for _, l := range loans {
		h.st.Work = append(h.st.Work, Work{ID: int64(len(h.st.Work) + 1), Loan: l, User: caller, RequestID: h.next, AssignedAt: mid})
	}
	h.ops = append(h.ops, Op{Caller: caller, Kind: Get, Type: OK, Invoke: at(inv), Complete: at(comp), DBInvoke: at(inv), DBComplete: at(comp),
		Request: h.next, Count: count, Status: status, Loans: loans})
	return &h.ops[len(h.ops)-1]
}

// dispose ends the caller's active row of the loan at the midpoint.
func (h *hb) dispose(caller, loan, action string, inv, comp int) *Op {
	for i := range h.st.Work {
		w := &h.st.Work[i]
		if w.Loan == loan && w.User == caller && w.Disposition == "" {
			w.Disposition, w.DisposedAt = action, at((inv+comp)/2)
			if action == "return" {
				w.ReturnAt = w.DisposedAt
			}
		}
	}
	h.ops = append(h.ops, Op{Caller: caller, Kind: Dispose, Type: OK, Invoke: at(inv), Complete: at(comp), Loan: loan, Action: action})
	return &h.ops[len(h.ops)-1]
}

// change makes the loan stop matching, committed at comp.
func (h *hb) change(caller, loan string, inv, comp int) *Op {
	for i := range h.st.Loans {
		if h.st.Loans[i].Key == loan {
			h.st.Loans[i].Matches = false
		}
	}
	h.ops = append(h.ops, Op{Caller: caller, Kind: Change, Type: OK, Invoke: at(inv), Complete: at(comp), DBInvoke: at(inv), DBComplete: at(comp), Loan: loan})
	return &h.ops[len(h.ops)-1]
}

// work: get, change, complete — a processor's loop for one loan.
func (h *hb) work(caller, loan string, start int) {
	h.get(caller, 1, start, start+10, loan)
	h.change(caller, loan, start+20, start+30)
	h.dispose(caller, loan, "complete", start+40, start+50)
}

func (h *hb) check(t *testing.T, opt Options) *Result {
	t.Helper()
	r := Check(h.ops, h.st, opt)
	t.Logf("\n%s", r.Report())
	return r
}

func valid(t *testing.T, h *hb, opt Options) {
	t.Helper()
	if r := h.check(t, opt); !r.Valid() {
		t.Fatalf("want no anomaly, got %v", r.Count())
	}
}

func finds(t *testing.T, h *hb, opt Options, kinds ...string) *Result {
	t.Helper()
	r := h.check(t, opt)
	got := r.Count()
	for _, k := range kinds {
		if got[k] == 0 {
			t.Errorf("want %s, got %v", k, got)
		}
	}
	for k := range got {
		if !slices.Contains(kinds, k) {
			t.Errorf("unexpected %s (want only %v)", k, kinds)
		}
	}
	for _, a := range r.Anomalies {
		if len(a.Ops) == 0 && len(a.Rows) == 0 {
			t.Errorf("%s comes with no slice of history", a.Kind)
		}
	}
	return r
}

func TestProcessorsTakingTurnsAreValid(t *testing.T) {
	h := newHB(5)
	h.work("a", "1", 0)
	h.work("b", "2", 5)
	// 3 completed without a change: it still matches and comes back.
	h.get("a", 1, 100, 110, "3")
	h.dispose("a", "3", "complete", 120, 130)
	h.get("b", 1, 140, 150, "3")
	h.dispose("b", "3", "return", 160, 170)
	h.get("a", 2, 180, 190, "3", "4")
	h.dispose("a", "3", "never", 200, 210)
	h.change("a", "4", 200, 205)
	h.dispose("a", "4", "complete", 210, 220)
	h.get("b", 1, 300, 310, "5")
	h.change("b", "5", 320, 330)
	h.dispose("b", "5", "complete", 340, 350)
	// Everything worked: empty is right.
	h.get("a", 1, 400, 410)
	valid(t, h, Options{})
}

func TestLoanActiveTwiceInTheDatabase(t *testing.T) {
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.dispose("a", "1", "return", 90, 110)
	h.get("b", 1, 120, 140, "1")
	h.dispose("b", "1", "complete", 150, 160)
	valid(t, h, Options{})

	// b's row assigned while a's was still active (a unique index would
	// stop it; a broken one, or a dialect without it, would not).
	h.st.Work[1].AssignedAt = at(50)
	finds(t, h, Options{}, LoanActiveTwice)
}

func TestLoanHeldTwiceByCallers(t *testing.T) {
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.dispose("a", "1", "return", 100, 110)
	h.get("b", 1, 105, 120, "1")
	h.dispose("b", "1", "complete", 130, 140)
	valid(t, h, Options{})

	// b was told it has loan 1 at 60, while a still held it (a invoked its
	// disposition at 100). The rows say nothing wrong: b's was assigned
	// after a's ended.
	h.ops[2].Invoke, h.ops[2].Complete = at(40), at(60)
	h.ops[2].DBInvoke = at(40)
	finds(t, h, Options{}, LoanHeldTwice)
}

func TestStaleHandOut(t *testing.T) {
	// b's get began before a's change committed: handing 1 to b first, then
	// to a, is a valid order.
	h := newHB(1)
	h.get("b", 1, 0, 10, "1")
	h.dispose("b", "1", "complete", 10, 12)
	h.get("a", 1, 5, 20, "1")
	h.change("a", "1", 25, 30)
	h.dispose("a", "1", "complete", 40, 50)
	valid(t, h, Options{})

	// Issue 33: a pool claim gives 1 to a, a works and completes it; a
	// round whose query ran before still hands 1 to b, whose get began
	// after the change.
	h = newHB(1)
	h.work("a", "1", 0)
	h.get("b", 1, 60, 70, "1")
	finds(t, h, Options{}, StaleHandOut, StaleAssignment)
}

func TestStaleHandOutNotAfterRematch(t *testing.T) {
	h := newHB(1)
	h.work("a", "1", 0)
	// The source row matches again (someone reopened the loan).
	h.ops = append(h.ops, Op{Caller: "admin", Kind: Change, Type: OK, Invoke: at(52), Complete: at(55), DBInvoke: at(52), DBComplete: at(55), Loan: "1", Matches: true})
	h.st.Loans[0].Matches = true
	h.get("b", 1, 60, 70, "1")
	valid(t, h, Options{})
}

func TestStaleAssignmentFromTheDatabaseClock(t *testing.T) {
	// b's get began before a's change (the callers' clock allows it), but
	// its row was assigned after the change's commit, by the database's
	// clock: the assignment did not see the committed change.
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.change("a", "1", 20, 30)
	h.dispose("a", "1", "complete", 40, 50)
	b := h.get("b", 1, 15, 70, "1")
	b.DBInvoke = at(15)
	h.st.Work[1].AssignedAt = at(60)
	finds(t, h, Options{}, StaleAssignment)

	// The same row assigned before the commit would overlap a's: not stale,
	// but active twice.
	h.st.Work[1].AssignedAt = at(25)
	finds(t, h, Options{}, LoanActiveTwice)
}

func TestHandOutAfterNever(t *testing.T) {
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.dispose("a", "1", "never", 20, 30)
	valid(t, h, Options{})

	h.get("b", 1, 40, 50, "1")
	finds(t, h, Options{}, HandOutAfterNever, AssignedAfterNever)
}

func TestAssignedAfterNeverFromTheRows(t *testing.T) {
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.dispose("a", "1", "never", 20, 30)
	// b's get overlaps a's disposition: the callers' clock cannot tell, the
	// rows can.
	h.get("b", 1, 22, 50, "1")
	h.st.Work[1].AssignedAt = at(40)
	finds(t, h, Options{}, AssignedAfterNever)
}

func TestRequestServedTwice(t *testing.T) {
	h := newHB(2)
	g := h.get("a", 1, 0, 10, "1")
	// The same request read again (a status, an attach): same answer.
	again := *g
	again.Invoke, again.Complete = at(20), at(30)
	h.ops = append(h.ops, again)
	valid(t, h, Options{})

	h.ops[1].Loans = []string{"2"}
	finds(t, h, Options{}, RequestServedTwice, RequestMismatch)
}

func TestRequestRowsMatchItsCount(t *testing.T) {
	h := newHB(2)
	h.get("a", 2, 0, 10, "1", "2")
	valid(t, h, Options{})

	h.st.Requests[0].Assigned = 1
	finds(t, h, Options{}, RequestMismatch)
}

func TestRequestLeftPending(t *testing.T) {
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.st.Requests = append(h.st.Requests, Request{ID: 9, User: "b", Status: "pending", Requested: 1})
	h.ops = append(h.ops, Op{Caller: "b", Kind: Get, Type: Info, Invoke: at(5), Count: 1})
	finds(t, h, Options{}, RequestLeftPending)

	// b was killed: its request may stay pending.
	h.ops = append(h.ops, Op{Caller: "b", Kind: Kill, Type: OK, Invoke: at(7), Complete: at(7)})
	valid(t, h, Options{})
}

func TestServedAfterCancel(t *testing.T) {
	h := newHB(1)
	h.st.Requests = append(h.st.Requests, Request{ID: 5, User: "a", Status: "cancelled", Requested: 1})
	h.ops = append(h.ops,
		Op{Caller: "a", Kind: Get, Type: OK, Invoke: at(0), Complete: at(10), Request: 5, Count: 1, Status: "pending"},
		Op{Caller: "a", Kind: Cancel, Type: OK, Invoke: at(20), Complete: at(30), Request: 5, Status: "cancelled"})
	valid(t, h, Options{})

	// Served after all.
	h.st.Requests[0].Status, h.st.Requests[0].Assigned = "assigned", 1
	h.st.Work = append(h.st.Work, Work{ID: 1, Loan: "1", User: "a", RequestID: 5, AssignedAt: at(40)})
	finds(t, h, Options{}, ServedAfterCancel)
}

func TestServedToGoneCaller(t *testing.T) {
	h := newHB(1)
	h.ops = append(h.ops,
		Op{Caller: "a", Kind: Get, Type: Info, Invoke: at(0), DBInvoke: at(0), Count: 1},
		Op{Caller: "a", Kind: Kill, Type: OK, Invoke: at(100), Complete: at(100), DBComplete: at(100)})
	h.st.Requests = append(h.st.Requests, Request{ID: 1, User: "a", Status: "assigned", Requested: 1, Assigned: 1, ServedAt: at(300)})
	h.st.Work = append(h.st.Work, Work{ID: 1, Loan: "1", User: "a", RequestID: 1, AssignedAt: at(300)})
	valid(t, h, Options{})                          // the rule is off
	valid(t, h, Options{AbandonBound: time.Second}) // served within the bound
	finds(t, h, Options{AbandonBound: 100 * time.Millisecond}, ServedToGoneCaller)
}

func TestDispositionInTheDatabaseOnce(t *testing.T) {
	h := newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.dispose("a", "1", "complete", 20, 30)
	valid(t, h, Options{})

	// Acknowledged, not there.
	h.st.Work[0].Disposition, h.st.Work[0].DisposedAt = "", time.Time{}
	finds(t, h, Options{}, DispositionLost)

	// There, but nobody invoked it.
	h = newHB(1)
	h.get("a", 1, 0, 10, "1")
	h.st.Work[0].Disposition, h.st.Work[0].DisposedAt = "complete", at(20)
	finds(t, h, Options{}, DispositionNotInvoked)

	// Invoked with an unknown outcome: there or not, both are fine.
	h.ops = append(h.ops, Op{Caller: "a", Kind: Dispose, Type: Info, Invoke: at(15), Loan: "1", Action: "complete"})
	valid(t, h, Options{})
}

func TestEmptyWhileEligible(t *testing.T) {
	h := newHB(3)
	h.work("a", "1", 0)
	h.work("b", "2", 0)
	// 3 active with c through the get: empty is right.
	h.get("c", 1, 100, 110, "3")
	h.get("d", 1, 120, 130)
	h.dispose("c", "3", "never", 140, 150)
	h.get("d", 1, 160, 170)
	valid(t, h, Options{})

	// 3 was returned at 50, free from then on: d's empty is wrong.
	h = newHB(3)
	h.work("a", "1", 0)
	h.get("b", 1, 0, 10, "3")
	h.dispose("b", "3", "return", 40, 50)
	h.get("d", 2, 120, 130, "2")
	finds(t, h, Options{}, EmptyWhileEligible)
}

func TestEmptyNotWhileReturnTimeAhead(t *testing.T) {
	h := newHB(1)
	h.get("b", 1, 0, 10, "1")
	d := h.dispose("b", "1", "return", 40, 50)
	d.After = time.Second
	h.st.Work[0].ReturnAt = at(1045)
	h.get("d", 1, 120, 130)
	valid(t, h, Options{})
}

func TestDistanceFromTheTop(t *testing.T) {
	h := newHB(5)
	h.get("a", 1, 0, 10, "1")  // the top
	h.get("b", 1, 20, 30, "4") // 2 and 3 were free: 2 better left
	r := h.check(t, Options{})
	if r.Distance.N != 2 || r.Distance.Top != 1 || r.Distance.Max != 2 {
		t.Fatalf("distance %+v, want 2 loans, 1 from the top, max 2", r.Distance)
	}
}

func TestSliceIsShortest(t *testing.T) {
	h := newHB(3)
	h.work("a", "1", 0)
	h.work("c", "3", 0)
	h.get("c", 1, 200, 210, "2") // other loans: not in the slice
	h.get("b", 1, 60, 70, "1")   // the stale hand-out
	r := finds(t, h, Options{}, StaleHandOut, StaleAssignment)
	for _, a := range r.Anomalies {
		for _, op := range a.Ops {
			if !op.touches("1", a.Request) {
				t.Errorf("%s's slice holds op #%d, which does not touch loan 1: %s", a.Kind, op.Index, r.FormatOp(op, ""))
			}
		}
	}
}

func TestLogRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	l := NewLog(&buf, "p1")
	g := l.Invoke(Op{Caller: "a", Kind: Get, Count: 30})
	d := l.Invoke(Op{Caller: "a", Kind: Dispose, Loan: "7", Action: "complete"}) // never completes: killed
	g.Loans, g.Status, g.Request = []string{"7"}, "assigned", 3
	l.Complete(g, OK)
	l.Record(Op{Caller: "a", Kind: Kill, Type: OK, Invoke: time.Now(), Complete: time.Now()})
	buf.WriteString(`{"caller":"a","ki`) // a line cut short by SIGKILL
	ops, err := ReadLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 {
		t.Fatalf("%d ops, want 3: %+v", len(ops), ops)
	}
	if ops[0].Type != OK || ops[0].Request != 3 || ops[0].Complete.IsZero() || ops[0].ID != g.ID {
		t.Errorf("completed get read back as %+v", ops[0])
	}
	if ops[1].Type != Info || !ops[1].Complete.IsZero() || ops[1].ID != d.ID {
		t.Errorf("uncompleted disposition read back as %+v", ops[1])
	}
	if _, err := ReadLog(strings.NewReader("{bad\n{}\n")); err == nil {
		t.Error("a bad line in the middle was accepted")
	}
}

// TestReportExample prints a report, for reading (go test -v -run Example).
func TestReportExample(t *testing.T) {
	if os.Getenv("HISTORY_SHOW") == "" {
		t.Skip("HISTORY_SHOW=1 prints an example report")
	}
	h := newHB(2)
	h.work("a", "1", 0)
	h.get("b", 1, 60, 70, "1")
	fmt.Println(Check(h.ops, h.st, Options{}).Report())
}
