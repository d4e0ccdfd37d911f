package child

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a stand-in for loanq: TestHelperLoanq
// starts the command given in helperCmd through Start and then waits, so the
// test can kill it as a user would kill loanq.
const (
	helperEnv = "CHILD_TEST_HELPER"
	helperCmd = "CHILD_TEST_CMD"
)

func init() {
	if os.Getenv(helperEnv) != "" {
		// The main thread is never ended by Go: keep it to the main
		// goroutine, so that the goroutines of "thread-exits" run on
		// threads that Go does end.
		runtime.LockOSThread()
	}
}

func TestHelperLoanq(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("run by the tests below as a stand-in for loanq")
	}
	start := func() {
		env := Environ(os.Environ(), "", nil)
		p, err := Start("/bin/sh", []string{"sh", "-c", os.Getenv(helperCmd)}, env, 2*time.Second, nil, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		// The command's pid, written before it could die.
		if err := os.WriteFile("leader", fmt.Appendf(nil, "%d\n", p.cmd.Process.Pid), 0o644); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	if mode == "thread-exits" {
		// Start from a goroutine that locks its thread and ends without
		// unlocking it: Go ends that OS thread. The command must not take
		// that for loanq's death.
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			start()
			close(done)
		}()
		<-done
		// Let Go end the thread before the test looks.
		time.Sleep(200 * time.Millisecond)
	} else {
		start()
	}
	fmt.Println("started")
	time.Sleep(5 * time.Minute)
}

// runHelper starts the stand-in for loanq running script and waits until
// the script has written its pid files into dir.
func runHelper(t *testing.T, mode, script, dir string, files ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLoanq$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperCmd+"="+script)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range files {
		for {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && strings.HasSuffix(string(b), "\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never written; helper said:\n%s", f, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return cmd
}

func pidIn(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid runs (a zombie, dead but not yet reaped by
// whoever adopted it, counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil && runtime.GOOS != "linux"
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// waitGone waits up to limit for every pid to be gone and says how long it
// took; it fails the test if one still runs then.
func waitGone(t *testing.T, limit time.Duration, pids ...int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		running := slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return !alive(p) })
		if len(running) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			for _, p := range running {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("pids %v still run %s after loanq was killed", running, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The shell's child (a `sleep` the parent-death signal never reaches) ends
// when loanq is killed with SIGKILL: the guard sends the command's process
// group SIGTERM.
func TestKilledLoanqStopsTheCommandsChildren(t *testing.T) {
	dir := t.TempDir()
	h := runHelper(t, "plain", `sleep 300 & echo $! > kid; echo $$ > sh; wait`, dir, "kid", "sh")
	sh, kid := pidIn(t, filepath.Join(dir, "sh")), pidIn(t, filepath.Join(dir, "kid"))
	if !alive(sh) || !alive(kid) {
		t.Fatal("the command is not running")
	}
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM ends both at once: well before the 2s SIGKILL follow-up.
	if took := waitGone(t, 10*time.Second, sh, kid); took > 1500*time.Millisecond {
		t.Fatalf("the command took %s to end after SIGTERM", took)
	}
}

// A command that ignores SIGTERM (and so do its children, which inherit
// that) is killed with SIGKILL once its delay has passed.
func TestKilledLoanqKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	h := runHelper(t, "plain", `trap "" TERM; sleep 300 & echo $! > kid; echo $$ > sh; wait`, dir, "kid", "sh")
	sh, kid := pidIn(t, filepath.Join(dir, "sh")), pidIn(t, filepath.Join(dir, "kid"))
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !alive(sh) || !alive(kid) {
		t.Fatal("a command that ignores SIGTERM ended before its SIGKILL delay (2s)")
	}
	waitGone(t, 10*time.Second, sh, kid)
}

// The parent-death signal belongs to the thread that forked: a command
// started from a goroutine whose locked thread then ends must keep running
// while loanq does (every command is forked on one dedicated thread).
func TestCommandOutlivesTheThreadThatStartedIt(t *testing.T) {
	dir := t.TempDir()
	h := runHelper(t, "thread-exits", `exec sleep 300`, dir, "leader")
	sh := pidIn(t, filepath.Join(dir, "leader"))
	time.Sleep(500 * time.Millisecond)
	if !alive(sh) {
		t.Fatal("the command died when the thread that started it ended, while loanq runs on")
	}
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 10*time.Second, sh)
}

// A guard killed on its own is replaced at the next Start, and the new one
// watches every command still running.
func TestGuardReplaced(t *testing.T) {
	p1, err := Start("/bin/sleep", []string{"sleep", "300"}, nil, time.Second, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Signal(syscall.SIGKILL)
	guard.mu.Lock()
	w := guard.w
	guard.mu.Unlock()
	if w == nil {
		t.Fatal("no guard after Start")
	}
	// Close loanq's end as if loanq had died: the guard stops p1 and ends.
	guard.mu.Lock()
	guard.w.Close()
	guard.w = nil
	guard.mu.Unlock()
	select {
	case <-p1.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not stop the command when loanq's end of the pipe closed")
	}
	if p1.Status() != 128+int(syscall.SIGTERM) {
		t.Fatalf("command ended with status %d, want SIGTERM's %d", p1.Status(), 128+int(syscall.SIGTERM))
	}
	p2, err := Start("/bin/sleep", []string{"sleep", "300"}, nil, time.Second, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Signal(syscall.SIGKILL)
	guard.mu.Lock()
	_, watched := guard.groups[p2.cmd.Process.Pid]
	_, forgotten := guard.groups[p1.cmd.Process.Pid]
	ok := guard.w != nil
	guard.mu.Unlock()
	if !ok || !watched || forgotten {
		t.Fatalf("after a new guard: running %v, watches the new command %v, still the ended one %v", ok, watched, forgotten)
	}
}

// Environ: the caller's environment without loanq's variables, DATABASE_URL
// only when it is loanq's DSN, the client's password variables (PGPASSWORD
// when loanq connects to PostgreSQL) only when given, and the contract's
// variables on top.
func TestEnviron(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/h", "LOANQ_DB=postgres://u:secret@h/db", "LOANQ_SERVE_TOKEN=tok",
		"LOANQ_OUTPUT=json", "LOANQ_USER=me", "LOANQ_TASK=stale", "DATABASE_URL=postgres://u:secret@h/db", "NOEQUALS",
		"PGPASSWORD=secret", "PGUSER=u"}
	got := Environ(base, "postgres://u:secret@h/db", []string{"PGPASSWORD"}, "LOANQ_TASK=t", "LOANQ_LOAN_ID=7")
	want := []string{"PATH=/bin", "HOME=/h", "NOEQUALS", "PGUSER=u", "LOANQ_TASK=t", "LOANQ_LOAN_ID=7"}
	if !slices.Equal(got, want) {
		t.Fatalf("Environ = %q, want %q", got, want)
	}
	// DATABASE_URL naming another database than loanq's stays, and so does
	// PGPASSWORD when loanq's client reads no password from it.
	got = Environ([]string{"DATABASE_URL=postgres://app/appdb", "PGPASSWORD=apps"}, "sqlite:loanq.db", nil)
	if !slices.Equal(got, []string{"DATABASE_URL=postgres://app/appdb", "PGPASSWORD=apps"}) {
		t.Fatalf("Environ removed the command's own DATABASE_URL or PGPASSWORD: %q", got)
	}
}

// The gate runs the command only after loanq's go: a loanq that dies
// before the guard watches the command's group (the gate pipe closes
// without a byte) leaves nothing running.
func TestGateWithoutGoRunsNothing(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "/bin/sh", "sh", "-c", "touch "+ran)
	cmd.Args[0] = "loanq-exec"
	cmd.Env = append(os.Environ(), gateEnv+"=1")
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close() // loanq "died" before its go
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("gate without a go: %v, want exit 125", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the gate ran the command without loanq's go")
	}
}

// Through the gate the command is itself (same pid as the Proc, its own
// process group, the name it was given), sees exactly the environment it
// was given, and inherits no pipe of loanq's beyond stdin/out/err.
func TestCommandThroughTheGate(t *testing.T) {
	var out bytes.Buffer
	p, err := Start("/bin/sh", []string{"mysh", "-c", `echo "pid $$ pgid $(ps -o pgid= -p $$ | tr -d ' ') name $0"; env; ls /proc/self/fd`},
		[]string{"ONLY=this"}, time.Second, nil, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Status() != 0 {
		t.Fatalf("exit %d\n%s", p.Status(), out.String())
	}
	pid := p.cmd.Process.Pid
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[0] != fmt.Sprintf("pid %d pgid %d name mysh", pid, pid) {
		t.Fatalf("first line %q, want the Proc's pid %d leading its group, named mysh", lines[0], pid)
	}
	var fds []string
	for _, l := range lines[1:] {
		switch {
		case strings.Contains(l, "="):
			if l != "ONLY=this" && !strings.HasPrefix(l, "PWD=") && !strings.HasPrefix(l, "SHLVL=") && !strings.HasPrefix(l, "_=") {
				t.Errorf("unexpected variable %q in the command's environment", l)
			}
		default:
			fds = append(fds, l)
		}
	}
	// The same listing from a plain exec (what the test process itself
	// hands on: 0, 1, 2, the directory ls reads, and whatever this test
	// inherited without close-on-exec) is the most there may be.
	plain, err := exec.Command("/bin/sh", "-c", "ls /proc/self/fd").Output()
	if err != nil {
		t.Fatal(err)
	}
	// A subset, not equal: a descriptor the test process has open without
	// close-on-exec at the moment of the plain exec only (another package's
	// test harness in the same run) is no leak of the gate's (seen once:
	// the plain exec had a 4 the command did not).
	may := map[string]bool{}
	for _, fd := range strings.Fields(string(plain)) {
		may[fd] = true
	}
	for _, fd := range fds {
		if !may[fd] {
			t.Fatalf("the command has open files %s, a plain exec %s: the gate leaked %s", strings.Join(fds, " "), strings.Join(strings.Fields(string(plain)), " "), fd)
		}
	}
}
