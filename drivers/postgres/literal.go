package postgres

import "strings"

// The one piece of the dialect that writes a value into SQL text, apart
// from the vocabulary of sql.go (whose texts are built from literals,
// constants and SQL only: e2e/fault_injection_test.go): a claim's four-eyes
// condition names its user in criteria that some drivers hand to a
// procedure as text (dispatch/governance.go, criteriaFor), where no bind
// can reach. TestFourEyesOddUserNameInClaim runs it with quotes and
// backslashes on every database.

// TextLiteral: an escape string (E'…'), whose backslashes and quotes are
// escaped whatever standard_conforming_strings says.
func (dialect) TextLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
