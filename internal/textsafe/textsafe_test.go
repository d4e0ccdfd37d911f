package textsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"verify-bank":                 "verify-bank",
		"é and 中文 stay":               "é and 中文 stay",
		"\x1b[2Jclear":                `\x1b[2Jclear`,
		"title\x1b]0;pwned\x07":       `title\x1b]0;pwned\x07`,
		"ana\u200b":                   `ana\u200b`,
		"a\u202eb\u2066c\u2069\ufeff": `a\u202eb\u2066c\u2069\ufeff`,
		"two\nlines\tand\rcr":         `two\nlines\tand\rcr`,
		"del\x7f c1\u009b":            `del\x7f c1\x9b`,
		"bad \xff byte":               `bad \xff byte`,
		"word\u2060joiner\u00adsoft":  `word\u2060joiner\xadsoft`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFirstUnsafe(t *testing.T) {
	for _, c := range []struct {
		in         string
		allowSpace bool
		pos        int
		r          rune
	}{
		{"ana", false, 0, 0},
		{"ana\u200b", false, 4, 0x200b},
		{"é\x1b", false, 2, 0x1b},
		{"a\tb", false, 2, '\t'},
		{"a\tb\nc", true, 0, 0},
		{"a\tb\x00", true, 4, 0},
		{"\u2067x", false, 1, 0x2067},
	} {
		pos, r, found := FirstUnsafe(c.in, c.allowSpace)
		if pos != c.pos || (found && r != c.r) || found != (c.pos > 0) {
			t.Errorf("FirstUnsafe(%q, %v) = %d, %U, %v; want %d, %U", c.in, c.allowSpace, pos, r, found, c.pos, c.r)
		}
	}
	if got := CharName(0x1b); got != "U+001B" {
		t.Errorf("CharName(ESC) = %s", got)
	}
}

// FuzzEscape: the escaped text holds no unsafe character and is valid UTF-8,
// whatever went in; clean text comes out unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"ana", "\x1b[31m", "a\u200bb", "\xff\xfe", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) || strings.ContainsFunc(got, Unsafe) {
			t.Fatalf("Escape(%q) = %q still holds an unsafe character", s, got)
		}
		if _, _, found := FirstUnsafe(s, false); !found && utf8.ValidString(s) && got != s {
			t.Fatalf("Escape changed clean text %q to %q", s, got)
		}
	})
}
