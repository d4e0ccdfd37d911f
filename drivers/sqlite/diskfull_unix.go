//go:build unix

package sqlite

import "syscall"

// lowOnSpace reports whether the filesystem holding dir has (almost) no room
// left for an unprivileged write: SQLite then fails to create its -wal and
// -shm files with a bare "disk I/O error".
func lowOnSpace(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return uint64(st.Bavail)*uint64(st.Bsize) < 64<<10
}
