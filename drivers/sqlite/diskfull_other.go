//go:build !unix

package sqlite

func lowOnSpace(string) bool { return false }
