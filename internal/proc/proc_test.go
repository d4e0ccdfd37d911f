package proc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestDeadOnThisHost(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s:%d:abcd", host, cmd.Process.Pid)
	if DeadOnThisHost(id) {
		t.Fatalf("a running process counted as gone")
	}
	_ = cmd.Process.Kill()
	// Not reaped yet: a zombie, which holds no database session. The signal
	// is delivered asynchronously: allow it a generous moment.
	deadline := time.Now().Add(10 * time.Second)
	for !DeadOnThisHost(id) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !DeadOnThisHost(id) {
		t.Fatalf("a killed, unreaped process counted as running")
	}
	_ = cmd.Wait()
	if !DeadOnThisHost(id) {
		t.Fatalf("a killed, reaped process counted as running")
	}
	for _, id := range []string{
		fmt.Sprintf("%s:%d:abcd", host, os.Getpid()),           // this process
		fmt.Sprintf("other-%s:%d:abcd", host, cmd.Process.Pid), // another host
		"garbage", host + ":x:abcd", "",
	} {
		if DeadOnThisHost(id) {
			t.Errorf("DeadOnThisHost(%q) = true, want false", id)
		}
	}
	if h, ok := ParseHolder("a:b:12:ff"); !ok || h.Host != "a:b" || h.PID != 12 {
		t.Errorf("ParseHolder = %+v %v", h, ok)
	}
}
