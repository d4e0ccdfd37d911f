// Package suggest finds the names a mistyped word was probably meant to be:
// the "did you mean" of loanq's messages (commands, flags, task names).
package suggest

import (
	"sort"
	"strings"
)

// Close returns the names within two edits of word (case-insensitively; the word itself is not
// suggested, the same name in other letter case is), or
// that start with it (word of two letters or more), sorted. Two edits catch
// a dropped, doubled or swapped letter ("intake-doc", "--usr", "craete").
func Close(word string, names []string) []string {
	w := strings.ToLower(word)
	var out []string
	for _, n := range names {
		if n == word {
			continue
		}
		l := strings.ToLower(n)
		if Distance(w, l) <= 2 || (len(w) >= 2 && strings.HasPrefix(l, w)) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Distance is the Levenshtein distance between a and b.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
