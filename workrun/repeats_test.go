package workrun

import (
	"github.com/loanq/loanq/loankey"
	"strconv"
	"testing"
)

// k is loan n of an integer task.
func k[N int | int64](n N) loankey.Key {
	return loankey.New(loankey.Integer, strconv.FormatInt(int64(n), 10))
}

// The streak of a loan: it grows while the loan is completed and taken
// again, ends when the loan is disposed of otherwise or the task answers
// empty, and the memory of completions is bounded (a loan completed longer
// ago than RepeatMemory completions did not come back "at once").
func TestRepeatsStreak(t *testing.T) {
	var rp repeats
	if got := rp.taken(k(7)); got != 0 {
		t.Fatalf("a loan never completed came back %d times", got)
	}
	rp.disposed(k(7), true, 0)
	for want := 1; want <= 3; want++ {
		got := rp.taken(k(7))
		if got != want {
			t.Fatalf("completed and taken again: came back %d times, want %d", got, want)
		}
		rp.disposed(k(7), true, got)
	}
	rp.disposed(k(7), false, 4) // returned: the streak ends
	if got := rp.taken(k(7)); got != 0 {
		t.Fatalf("after a return the loan came back %d times, want 0", got)
	}
	rp.disposed(k(7), true, 0)
	rp.empty()
	if got := rp.taken(k(7)); got != 0 {
		t.Fatalf("after an empty answer the loan came back %d times, want 0", got)
	}

	rp.disposed(k(1), true, 0)
	for id := int64(100); id < 100+RepeatMemory-1; id++ {
		rp.disposed(k(id), true, 0)
	}
	if rp.taken(k(1)) != 1 {
		t.Fatal("loan 1, completed within the memory, was forgotten")
	}
	rp.disposed(k(1), true, 1) // completed again: now the newest
	rp.disposed(k(99), true, 0)
	if rp.taken(k(1)) != 2 || rp.taken(k(100)) != 0 {
		t.Fatalf("memory: loan 1 came back %d times (want 2), loan 100 (oldest, forgotten) %d (want 0)", rp.taken(k(1)), rp.taken(k(100)))
	}
	if len(rp.back) > RepeatMemory || len(rp.order) > RepeatMemory {
		t.Fatalf("memory holds %d loans, %d completions; at most %d", len(rp.back), len(rp.order), RepeatMemory)
	}
}
