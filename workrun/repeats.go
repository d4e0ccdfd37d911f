package workrun

import (
	"github.com/loanq/loanq/loankey"
)

// RepeatMemory bounds the loans a run remembers having completed: one that
// comes back after this many other completions did not come back "at once".
const RepeatMemory = 4096

// repeats tracks the loans this run completed that come straight back: a
// completed loan that still matches the task's criteria is eligible again,
// so a command that changes nothing the criteria read gets it back at once,
// without end. "At once" is: before the task has answered empty, and within
// the last RepeatMemory completions. Called with Runner.mu held.
type repeats struct {
	back   map[loankey.Key]repeat // completed loans: how often each came back in a row
	order  []repeat               // the same, oldest completion first, to forget the oldest
	seq    uint64
	warned bool
	// stop is set once a loan came back MaxRepeats times in a row.
	stop *RepeatsError
}

type repeat struct {
	loan  loankey.Key
	times int // times it came back in a row
	seq   uint64
}

// taken records a loan a request returned and says how many times in a row
// it has now come back after this run completed it (0: it did not).
func (rp *repeats) taken(loan loankey.Key) int {
	if c, ok := rp.back[loan]; ok {
		return c.times + 1
	}
	return 0
}

// disposed records how a taken loan ended: completed, it is remembered with
// times (how often it had come back when taken); otherwise its streak ends.
func (rp *repeats) disposed(loan loankey.Key, completed bool, times int) {
	if !completed {
		delete(rp.back, loan)
		return
	}
	if rp.back == nil {
		rp.back = map[loankey.Key]repeat{}
	}
	rp.seq++
	c := repeat{loan: loan, times: times, seq: rp.seq}
	rp.back[loan] = c
	rp.order = append(rp.order, c)
	for len(rp.order) > RepeatMemory {
		old := rp.order[0]
		rp.order = rp.order[1:]
		if cur, ok := rp.back[old.loan]; ok && cur.seq == old.seq {
			delete(rp.back, old.loan)
		}
	}
}

// empty forgets every completion: the task answered empty, so whatever
// comes later did not come back at once.
func (rp *repeats) empty() {
	rp.back, rp.order = nil, nil
}
