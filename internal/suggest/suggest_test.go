package suggest

import (
	"reflect"
	"testing"
)

func TestClose(t *testing.T) {
	names := []string{"intake-docs", "verify-bank", "user", "db", "output"}
	for _, c := range []struct {
		word string
		want []string
	}{
		{"intake-doc", []string{"intake-docs"}},
		{"usr", []string{"user"}},
		{"INTAKE-DOCS", []string{"intake-docs"}},
		{"user", nil}, // the word itself is not a suggestion
		{"nothing-like-it", nil},
		{"verif", []string{"verify-bank"}},
	} {
		if got := Close(c.word, names); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Close(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	if d := Distance("craete", "create"); d != 2 {
		t.Errorf("Distance(craete, create) = %d, want 2", d)
	}
}
