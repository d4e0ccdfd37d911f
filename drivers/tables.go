package drivers

import (
	"fmt"
	"strings"
	"time"
)

// Tables is what a portable CREATE TABLE and INSERT need from a dialect.
type Tables struct {
	BigInt   string // a 64-bit integer (ids, amounts); on SQLite INTEGER, so an id primary key is the rowid
	SmallInt string // a small integer (a priority from 1 to 5)
	Flag     string // a 0/1 yes-or-no column: not every dialect has a boolean column type
	Text     string // a string of at most %d characters (VARCHAR(%d)); a type without a length may leave %d out
	Time     string // a UTC time without zone
	Options  string // what follows CREATE TABLE's closing parenthesis, or ""
	// TimeLayout, when not "", says Time columns hold text: a time is bound
	// formatted with this fixed-width layout (to the second), so that text
	// order is time order.
	TimeLayout string
	// MultiRowValues: one INSERT … VALUES (…), (…) may carry several rows.
	MultiRowValues bool
}

// TextOf is the type of a string of at most n characters.
func (t Tables) TextOf(n int) string {
	if strings.Contains(t.Text, "%d") {
		return fmt.Sprintf(t.Text, n)
	}
	return t.Text
}

// TimeArg is how a time is bound to a column of type Time.
func (t Tables) TimeArg(at time.Time) any {
	if t.TimeLayout != "" {
		return at.UTC().Format(t.TimeLayout)
	}
	return at
}
