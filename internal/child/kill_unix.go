//go:build !windows

package child

import "syscall"

// killGroup sends sig to the process group pgid leads.
func killGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

// supported: commands run under a guard on every Unix.
func supported() error { return nil }
