//go:build unix

package proc

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// gone: signal 0 checks that the process exists (ESRCH: it does not; EPERM:
// it does, owned by another user). A killed process whose parent has not yet
// reaped it is a zombie: it still exists but runs no code and holds no
// database session, so it counts as gone (Linux /proc; elsewhere a zombie
// counts as running and its lease ends with the TTL).
func gone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses, the state
	// follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}
