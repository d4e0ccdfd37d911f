package postgres

// What brief_test.go checks of the connector from outside the package.
var (
	ShouldPing = shouldPing
	OpenedKey  = openedKey
)
