package mysql

import "encoding/hex"

// The one piece of the dialect that writes a value into SQL text, apart
// from the vocabulary of sql.go (whose texts are built from literals,
// constants and SQL only: e2e/fault_injection_test.go): a claim's four-eyes
// condition names its user in criteria that some drivers hand to a
// procedure as text (dispatch/governance.go, criteriaFor), where no bind
// can reach. TestFourEyesOddUserNameInClaim runs it with quotes and
// backslashes on every database.

// TextLiteral: the text's UTF-8 bytes in hex, read as utf8mb4 in loanq's
// collation: no quote or backslash to escape, whatever the sql_mode says
// of backslashes (NO_BACKSLASH_ESCAPES).
func (dialect) TextLiteral(s string) string {
	if s == "" {
		return "''"
	}
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "' COLLATE utf8mb4_bin"
}
