package commands

import (
	"io"
	"reflect"
	"testing"
)

func TestReorderArgs(t *testing.T) {
	app := NewApp(io.Discard, io.Discard, new(bool))
	cases := []struct{ in, want []string }{
		{[]string{"loanq", "work", "get", "T", "--count", "3"},
			[]string{"loanq", "work", "get", "--count", "3", "--", "T"}},
		{[]string{"loanq", "--db", "sqlite:x.db", "task", "list"},
			[]string{"loanq", "--db", "sqlite:x.db", "task", "list"}},
		// Global flags typed last, or between command words, move to the front.
		{[]string{"loanq", "task", "list", "--db", "sqlite:x.db", "-o", "json"},
			[]string{"loanq", "--db", "sqlite:x.db", "-o", "json", "task", "list"}},
		{[]string{"loanq", "task", "--user=ana", "show", "T"},
			[]string{"loanq", "--user=ana", "task", "show", "--", "T"}},
		// A negative number is a positional value, not a flag.
		{[]string{"loanq", "disposition", "T", "-5", "complete"},
			[]string{"loanq", "disposition", "--", "T", "-5", "complete"}},
		// Boolean flags take no value; "--" ends flag handling.
		{[]string{"loanq", "work", "get", "T", "--no-wait", "--", "--count"},
			[]string{"loanq", "work", "get", "--no-wait", "--", "T", "--count"}},
	}
	for _, c := range cases {
		if got := reorderArgs(app, c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("reorderArgs(%q)\n got  %q\n want %q", c.in, got, c.want)
		}
	}
}
