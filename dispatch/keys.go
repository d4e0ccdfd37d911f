package dispatch

import (
	"encoding/json"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"slices"
	"unicode/utf8"

	"github.com/loanq/loanq/problem"
)

// quoteKey is a loan key as a JSON string: loanq's own loan_id columns are
// text, and the lists they are compared with or filled from are strings.
func quoteKey(k string) string {
	b, _ := json.Marshal(k) // a string always marshals
	return string(b)
}

// keyChunks splits keys into consecutive runs whose JSON list
// (loankey.JSON of kind) fits in maxAssignmentsJSON bytes, Oracle's
// VARCHAR2 bind limit: a list of 200-character text keys is far longer than
// one of integers. Each run holds at least one key; their order is kept.
func keyChunks(kind loankey.Kind, keys []string) [][]string {
	var out [][]string
	start, size := 0, 2 // the brackets
	for i, k := range keys {
		one := len(loankey.JSON(kind, []string{k})) - 2 + 1 // the key and its comma
		if i > start && size+one > maxAssignmentsJSON {
			out = append(out, keys[start:i])
			start, size = i, 2
		}
		size += one
	}
	if start < len(keys) {
		out = append(out, keys[start:])
	}
	return out
}

// checkKeyLength refuses a key longer than loanq stores (loankey.MaxLength
// characters): the task cannot hand it out, and says which task and how to
// leave such rows out, instead of the database's "value too long".
func checkKeyLength(task *Task, key string) error {
	if n := utf8.RuneCountInString(key); n > loankey.MaxLength {
		return &problem.Error{Kind: problem.Usage,
			Msg:  fmt.Sprintf("task %s found a loan key of %d characters in %s.%s: loan keys may have at most %d", task.Name, n, task.Source, task.Key, loankey.MaxLength),
			Hint: fmt.Sprintf("leave such rows out of the task: add AND LENGTH(%s) <= %d to its --where (task update)", task.Key, loankey.MaxLength)}
	}
	return nil
}

// fitKeys splits keys read from a task's pool into those that are keys of
// the task's kind as loanq writes them (loankey.Fits), in order, and the
// rest. Only the first may be bound against the source: a pool row is
// written by rounds, but also by anyone allowed to write the table, and an
// unfit key bound as the source column's type fails the whole claim
// statement, for every caller of the task until a refill replaced the pool
// (docs/security.md). The rest are no loans of the task: dropped like stale
// candidates, never handed out.
func fitKeys(task *Task, keys []string) (fit, unfit []string) {
	for i, k := range keys {
		if loankey.Fits(task.KeyKind, k) {
			if unfit != nil {
				fit = append(fit, k)
			}
			continue
		}
		if unfit == nil {
			fit = slices.Clone(keys[:i])
		}
		unfit = append(unfit, k)
	}
	if unfit == nil {
		return keys, nil // the usual case: nothing copied
	}
	return fit, unfit
}
