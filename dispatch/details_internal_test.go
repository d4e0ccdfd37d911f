package dispatch

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loanq/loanq/problem"
)

func TestCheckLink(t *testing.T) {
	show := []string{"borrower", "Amount"}
	for _, c := range []struct {
		tmpl string
		ok   bool
	}{
		{"", true},
		{"https://los.example/loans/{key}", true},
		{"http://los.example:8080/l?id={key}&b={borrower}&a={amount}", true}, // case of a column does not matter
		{"HTTPS://los.example/{key}", true},
		{"https://los.example/{nosuch}", false},
		{"https://los.example/{key", false},
		{"https://los.example/key}", false},
		{"javascript:alert(1)//{key}", false},
		{"//los.example/{key}", false},
		{"https://{key}.example/", false},
		{"https://{borrower}/x", false},
		{"https://user@evil.example/{key}", false},
		{"https:///{key}", false},
		{"https://los.example/a b/{key}", false},
		{"https://los.example/\"{key}", false},
	} {
		err := CheckLink(c.tmpl, show)
		if (err == nil) != c.ok {
			t.Errorf("CheckLink(%q) = %v, want ok=%v", c.tmpl, err, c.ok)
		}
		if err != nil && problem.KindOf(err) != problem.Usage {
			t.Errorf("CheckLink(%q): %v is not bad input (exit 2)", c.tmpl, err)
		}
	}
}

func TestRenderLinkEscapes(t *testing.T) {
	v := func(s string) *string { return &s }
	show := []string{"borrower", "amount"}
	d := Details{{Column: "borrower", Value: v(`Bo & Co/<b>?#=+ é`)}, {Column: "amount"}}
	got := renderLink("https://los.example/loans/{key}?b={borrower}&a={AMOUNT}", "a/b c", show, d)
	want := "https://los.example/loans/a%2Fb%20c?b=Bo%20%26%20Co%2F%3Cb%3E%3F%23%3D%2B%20%C3%A9&a="
	if got == nil || *got != want {
		t.Errorf("renderLink = %v, want %s", got, want)
	}
	if renderLink("", "1", nil, nil) != nil {
		t.Error("no template: want no link")
	}
}

func TestParseShow(t *testing.T) {
	cols, err := ParseShow(" borrower , amount,app.x ")
	if err == nil {
		t.Errorf("a qualified column was taken: %v", cols)
	}
	cols, err = ParseShow(" borrower , amount ")
	if err != nil || len(cols) != 2 || cols[0] != "borrower" || cols[1] != "amount" {
		t.Errorf("ParseShow = %v, %v", cols, err)
	}
	for _, bad := range []string{"a,,b", "a;drop", "a,A", "a b", "x'"} {
		if _, err := ParseShow(bad); problem.KindOf(err) != problem.Usage {
			t.Errorf("ParseShow(%q) = %v, want bad input", bad, err)
		}
	}
	if cols, err := ParseShow(""); err != nil || cols != nil {
		t.Errorf("ParseShow(\"\") = %v, %v; want none", cols, err)
	}
}

func TestDetailsJSONKeepsOrder(t *testing.T) {
	v := "Ann <b>"
	b, err := json.Marshal(LoanItem{Task: "t", LoanID: [1]LoanItem{}[0].LoanID, Details: Details{{Column: "z", Value: &v}, {Column: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got := string(m["details"]); got != `{"z":"Ann \u003cb\u003e","a":null}` {
		t.Errorf("details = %s", got)
	}
	if got := string(m["link"]); got != "null" {
		t.Errorf("link = %s, want null", got)
	}
}

func TestNextOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	cands := func() []nextCandidate {
		return []nextCandidate{
			{name: "low-old", priority: 0, waitingSince: t0},
			{name: "high-new", priority: 10, waitingSince: t0.Add(3 * time.Hour)},
			{name: "high-old", priority: 10, waitingSince: t0.Add(time.Hour)},
			{name: "mid", priority: 5, waitingSince: t0.Add(2 * time.Hour)},
			{name: "b-tie", priority: 5, waitingSince: t0.Add(2 * time.Hour)},
		}
	}
	for order, want := range map[string][]string{
		OrderPriority: {"high-old", "high-new", "b-tie", "mid", "low-old"},
		OrderOldest:   {"low-old", "high-old", "b-tie", "mid", "high-new"},
	} {
		c := cands()
		nextOrder(c, order)
		var got []string
		for _, x := range c {
			got = append(got, x.name)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %v", order, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s order: %v, want %v", order, got, want)
				break
			}
		}
	}
	if _, err := ParseTaskOrder("newest"); problem.KindOf(err) != problem.Usage {
		t.Errorf("ParseTaskOrder(newest) = %v, want bad input", err)
	}
}
