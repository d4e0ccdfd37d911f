package drivers

import (
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
)

// LockSourceKeys locks the source rows of the given keys that no other
// transaction holds, passing over the held ones, and returns the keys it
// locked (as text): binds the keys as a JSON array text. On a rows task a
// pool claim and a serving round take these locks before they assign, as a
// rows claim's locking read does, so that no two callers of the task can be
// assigning the same loan at once: the one who holds the source row is the
// only one who may assign it until its commit. Without them a claim whose
// insert was stalled (InnoDB's AUTO-INC lock) after its snapshot was taken
// could assign a loan a rows claim had assigned, and its processor
// disposed of, meanwhile (docs/algorithm.md, "What a round may hand out").
// The task's criteria were checked lockable row by row when it was given
// the rows strategy (checkLockable).
func LockSourceKeys(d Dialect, src CriteriaSource) *Stmt[engineio.RecheckParams] {
	text := fmt.Sprintf("SELECT %s FROM %s src\nWHERE %s\nFOR UPDATE SKIP LOCKED",
		selectedKey(d, src), src.Source, d.InKeys("src."+src.Key, d.Placeholder(1), src.Kind))
	s, err := compile[engineio.RecheckParams](d, "LockSourceKeys", text, "ids")
	if err != nil {
		panic("drivers: " + err.Error()) // RecheckParams has ids
	}
	return s
}
