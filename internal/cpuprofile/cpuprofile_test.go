package cpuprofile

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// With the variable set, Start writes a profile (gzip-compressed protocol
// buffers, as pprof writes them) to the file it names, "%p" being the
// process id; without it, nothing.
func TestStartWritesAProfile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(Env, filepath.Join(dir, "run-%p.pprof"))
	stop := Start()
	n := 0
	for i := range 5_000_000 {
		n += i % 7
	}
	stop()
	b, err := os.ReadFile(filepath.Join(dir, "run-"+strconv.Itoa(os.Getpid())+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the profile is %d bytes and not gzip data (%d)", len(b), n)
	}

	t.Setenv(Env, "")
	Start()()
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in %s, want the one profile", len(entries), dir)
	}
}
