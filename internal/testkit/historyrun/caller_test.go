package historyrun

import (
	"slices"
	"testing"
)

func TestRequestInAMessage(t *testing.T) {
	for msg, want := range map[string]int64{
		"serving request 17: running the criteria query of task t: EOF": 17,
		"loanq: claiming from the pool of task t: conn closed":          0,
		"request 3 for task t is still pending: check again":            3,
	} {
		if got := requestIn(msg); got != want {
			t.Errorf("requestIn(%q) = %d, want %d", msg, got, want)
		}
	}
}

func TestCLIAnswer(t *testing.T) {
	a, err := cliAnswer(`{"request_id": 9, "status": "partial", "loans": [12, 7]}`)
	if err != nil || a.Request != 9 || a.Status != "partial" || !slices.Equal(a.Loans, []string{"12", "7"}) {
		t.Fatalf("cliAnswer: %+v, %v", a, err)
	}
	if a, err := cliAnswer(`{"request_id": 9, "status": "assigned", "loans": ["a-1"]}`); err != nil || !slices.Equal(a.Loans, []string{"a-1"}) {
		t.Fatalf("text keys: %+v, %v", a, err)
	}
	if _, err := cliAnswer("loanq: no such task"); err == nil {
		t.Fatal("not JSON, accepted")
	}
}

func TestSeedsDifferPerCaller(t *testing.T) {
	a, b, a2 := seedOf(1, "w1-c00"), seedOf(1, "w1-c01"), seedOf(1, "w1-c00")
	x, y, z := a.Uint64(), b.Uint64(), a2.Uint64()
	if x == y || x != z {
		t.Fatalf("seeds: %d %d %d: want each caller its own, the same for the same name", x, y, z)
	}
}
