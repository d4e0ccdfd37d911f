// Package textsafe keeps text from the database from driving the terminal
// it is printed on, and names the characters loanq refuses in the names and
// criteria it stores.
//
// A criteria text, a task name or a user name written into the database by
// hand (or by an older loanq) may hold an ESC that starts a terminal control
// sequence (clear the screen, rewrite the line, set the window title), or a
// zero-width character that makes "ana\u200b" print as "ana". Text output
// passes such values through Escape; user and task names with such
// characters are refused on input (FirstUnsafe names the character).
package textsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r is a character that does not print as itself:
// C0 controls (tab and line breaks included), DEL, C1 controls, and the
// invisible format characters — zero-width spaces and joiners, word joiner
// and invisible operators, the byte-order mark, soft hyphen, the bidi
// embeddings, overrides and isolates that reorder what follows, and the
// Unicode line and paragraph separators.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x00ad, r == 0x061c, r == 0x180e:
		return true
	case r >= 0x200b && r <= 0x200f: // ZWSP, ZWNJ, ZWJ, LRM, RLM
		return true
	case r >= 0x2028 && r <= 0x202e: // line/paragraph separators, LRE … RLO
		return true
	case r >= 0x2060 && r <= 0x2064: // word joiner, invisible operators
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	case r == 0xfeff: // BOM, zero-width no-break space
		return true
	}
	return false
}

// FirstUnsafe returns the 1-based character position and the rune of the
// first unsafe character of s. With allowSpace, tab, line feed and carriage
// return are allowed (SQL text may span lines).
func FirstUnsafe(s string, allowSpace bool) (pos int, r rune, found bool) {
	pos = 0
	for _, r := range s {
		pos++
		if allowSpace && (r == '\t' || r == '\n' || r == '\r') {
			continue
		}
		if Unsafe(r) {
			return pos, r, true
		}
	}
	return 0, 0, false
}

// CharName is how messages name a character: U+001B.
func CharName(r rune) string { return fmt.Sprintf("U+%04X", r) }

// Escape returns s with every unsafe character written as a Go-style escape
// (\x1b, \n, \u200b) and every byte that is not UTF-8 as \xNN, so that what
// is printed is what is stored and nothing is interpreted by the terminal.
// Text without such characters is returned as it is.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case Unsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			return !strings.ContainsFunc(s, Unsafe) && utf8.ValidString(s)
		}
	}
	return true
}
