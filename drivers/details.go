package drivers

import (
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
	"strings"
)

// LoanDetails reads the columns a task shows with each loan (task create
// --show, dispatch/details.go) for the given keys, in one statement: the key
// as loanq stores it (loanq_key), then the columns in the order given. Binds
// the keys as a JSON array text (KeysJSON), looked up through the key
// column's index (InKeys). columns are identifiers the task's definition
// checked (dispatch.checkShowColumns) and its source accepted when the task
// was stored; they are read again by the caller before they are spliced.
func LoanDetails(d Dialect, src CriteriaSource, columns []string) *Stmt[engineio.RecheckParams] {
	text := fmt.Sprintf("SELECT %s%s FROM %s src\nWHERE %s",
		selectedKey(d, src), detailList(columns), src.Source, d.InKeys("src."+src.Key, d.Placeholder(1), src.Kind))
	s, err := compile[engineio.RecheckParams](d, "LoanDetails", text, "ids")
	if err != nil {
		panic("drivers: " + err.Error()) // RecheckParams has ids
	}
	return s
}

// SourceProbe selects the key column of a source and the given columns,
// and returns no row: written once, every dialect reads it alike. Its
// column types tell the key's kind before the criteria query runs
// (KeyKindOf), and it is the check, when a task is created or changed,
// that every --show column exists in its source (the database's error
// names the one that does not).
func SourceProbe(d Dialect, src CriteriaSource, columns ...string) *Stmt[engineio.NoParams] {
	s, err := compile[engineio.NoParams](d, "SourceProbe", "SELECT src."+src.Key+detailList(columns)+" FROM "+src.Source+" src WHERE 1 = 0")
	if err != nil {
		panic("drivers: " + err.Error()) // no binds to check
	}
	return s
}

func detailList(columns []string) string {
	var b strings.Builder
	for _, c := range columns {
		b.WriteString(", src.")
		b.WriteString(c)
	}
	return b.String()
}
