package dispatch

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The allocation rule alone, no database: what a round gives each pending
// request from the candidates its criteria query found.
func TestPlanAllocation(t *testing.T) {
	req := func(id int64, user string, n int) pendingRequest {
		return pendingRequest{id: id, user: user, requested: n}
	}
	abc := []string{"a", "b", "c", "d", "e"}
	for _, c := range []struct {
		name string
		in   allocation
		// served: "id status loans" per request answered, oldest first
		served []string
		left   []string
	}{
		{name: "nothing pending: every candidate is left",
			in:   allocation{loans: abc, exhausted: true},
			left: abc},
		{name: "oldest first, each from the front of what is left",
			in:     allocation{pending: []pendingRequest{req(1, "ann", 2), req(2, "bob", 1), req(3, "cy", 1)}, loans: abc},
			served: []string{"1 assigned a,b", "2 assigned c", "3 assigned d"},
			left:   []string{"e"}},
		{name: "exhausted: the last filled in part, the next empty",
			in:     allocation{pending: []pendingRequest{req(1, "ann", 3), req(2, "bob", 3), req(3, "cy", 1)}, loans: abc, exhausted: true},
			served: []string{"1 assigned a,b,c", "2 partial d,e", "3 empty "}},
		{name: "exhausted, no candidate: every request empty",
			in:     allocation{pending: []pendingRequest{req(1, "ann", 1), req(2, "bob", 2)}, exhausted: true},
			served: []string{"1 empty ", "2 empty "}},
		{name: "more may exist: the request it cannot fill waits, and no later one overtakes it",
			in:     allocation{pending: []pendingRequest{req(1, "ann", 2), req(2, "bob", 4), req(3, "cy", 1)}, loans: abc},
			served: []string{"1 assigned a,b"},
			left:   []string{"c", "d", "e"}},
		{name: "more may exist, nothing found: nothing answered",
			in:   allocation{pending: []pendingRequest{req(1, "ann", 1)}},
			left: nil},
		{name: "cap reached: empty at once, even while more may exist, and the loans go on",
			in: allocation{pending: []pendingRequest{req(1, "ann", 2), req(2, "bob", 1)}, loans: abc,
				maxActive: 3, active: map[string]int{"ann": 3, "bob": 0}},
			served: []string{"1 empty ", "2 assigned a"},
			left:   []string{"b", "c", "d", "e"}},
		{name: "cap cuts a request short: partial, even while more may exist",
			in: allocation{pending: []pendingRequest{req(1, "ann", 4), req(2, "bob", 1)}, loans: abc,
				maxActive: 3, active: map[string]int{"ann": 1}},
			served: []string{"1 partial a,b", "2 assigned c"},
			left:   []string{"d", "e"}},
		{name: "cap over the limit already (lowered since): empty, never negative",
			in: allocation{pending: []pendingRequest{req(1, "ann", 2)}, loans: abc,
				maxActive: 2, active: map[string]int{"ann": 5}},
			served: []string{"1 empty "},
			left:   abc},
		{name: "cap counts what the round gave the user already",
			in: allocation{pending: []pendingRequest{req(1, "ann", 2), req(2, "ann", 2)}, loans: abc,
				maxActive: 3, active: map[string]int{"ann": 0}},
			served: []string{"1 assigned a,b", "2 partial c"},
			left:   []string{"d", "e"}},
		{name: "cap and loans both short: the cap decides what it asks of the loans",
			in: allocation{pending: []pendingRequest{req(1, "ann", 3)}, loans: []string{"a"}, exhausted: true,
				maxActive: 2, active: map[string]int{"ann": 1}},
			served: []string{"1 partial a"}},
		{name: "a cancelled request is left out, its loans go to the next",
			in: allocation{pending: []pendingRequest{req(1, "ann", 1), req(2, "bob", 2), req(3, "cy", 2)}, loans: abc,
				skip: map[int64]bool{2: true}},
			served: []string{"1 assigned a", "3 assigned b,c"},
			left:   []string{"d", "e"}},
		{name: "a duplicate candidate is not the plan's business (the one-active-row constraint refuses it)",
			in:     allocation{pending: []pendingRequest{req(1, "ann", 1), req(2, "bob", 1)}, loans: []string{"a", "a"}},
			served: []string{"1 assigned a", "2 assigned a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := planAllocation(c.in)
			var served []string
			var work []assignment
			for _, o := range p.served {
				served = append(served, fmt.Sprintf("%d %s %s", o.request.id, o.status, strings.Join(o.loans, ",")))
				for _, l := range o.loans {
					work = append(work, assignment{loan: l, request: o.request.id, user: o.request.user})
				}
			}
			if !reflect.DeepEqual(served, c.served) {
				t.Errorf("served %q, want %q", served, c.served)
			}
			if !reflect.DeepEqual(p.work, work) {
				t.Errorf("work rows %v, want the served loans in order %v", p.work, work)
			}
			if fmt.Sprint(p.left) != fmt.Sprint(c.left) {
				t.Errorf("left %v, want %v", p.left, c.left)
			}
		})
	}
}

// Planning again without a request found cancelled leaves the answers
// before it as they were (assign's finishServed relies on it).
func TestPlanAllocationPrefixStands(t *testing.T) {
	in := allocation{pending: []pendingRequest{{id: 1, user: "ann", requested: 2}, {id: 2, user: "bob", requested: 2},
		{id: 3, user: "cy", requested: 2}, {id: 4, user: "dee", requested: 2}}, loans: []string{"a", "b", "c", "d", "e"},
		exhausted: true, maxActive: 5, active: map[string]int{"ann": 4}}
	full := planAllocation(in)
	for i, o := range full.served {
		in.skip = map[int64]bool{o.request.id: true}
		again := planAllocation(in)
		if !reflect.DeepEqual(again.served[:i], full.served[:i]) {
			t.Errorf("without request %d: the answers before it changed: %v, were %v", o.request.id, again.served[:i], full.served[:i])
		}
	}
}

func TestUnderCap(t *testing.T) {
	for _, c := range []struct{ requested, maxActive, active, want int }{
		{3, 0, 7, 3}, // no cap
		{3, 5, 1, 3}, // room enough
		{3, 5, 3, 2}, // cut short
		{3, 5, 5, 0}, // reached
		{3, 2, 5, 0}, // over (the cap lowered since): none, never negative
	} {
		if got := underCap(c.requested, c.maxActive, c.active); got != c.want {
			t.Errorf("underCap(%d, %d, %d) = %d, want %d", c.requested, c.maxActive, c.active, got, c.want)
		}
	}
}

func TestRequestStatus(t *testing.T) {
	for _, c := range []struct {
		requested, taken int
		want             string
	}{{3, 3, StatusAssigned}, {3, 1, StatusPartial}, {3, 0, StatusEmpty}, {1, 1, StatusAssigned}} {
		if got := requestStatus(c.requested, c.taken); got != c.want {
			t.Errorf("requestStatus(%d, %d) = %s, want %s", c.requested, c.taken, got, c.want)
		}
	}
}
