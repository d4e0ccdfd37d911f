//go:build cgo

package oracle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/problem"
)

// TestOpenErrorHidesPassword connects to a port where no Oracle listens. On a
// machine without Oracle Instant Client godror fails first, with DPI-1047,
// and loanq must add the install hint; with Instant Client it is a
// connection error. Either way the password never shows.
func TestOpenErrorHidesPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := (&Driver{}).Open(ctx, mustDSN(t, "oracle://scott:tiger-pw@127.0.0.1:1/XEPDB1"))
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded against a closed port")
	}
	msg := err.Error()
	t.Logf("Open: %s", msg)
	if strings.Contains(msg, "tiger") {
		t.Errorf("password in %q", msg)
	}
	if !strings.Contains(msg, "oracle://scott:***@127.0.0.1:1/XEPDB1") {
		t.Errorf("error does not name the (redacted) DSN: %q", msg)
	}
	if strings.Contains(msg, "DPI-1047") && !strings.Contains(msg, "Instant Client Basic") {
		t.Errorf("DPI-1047 without the install hint: %q", msg)
	}
}

func TestClassifyDPI1047(t *testing.T) {
	cause := errors.New(`DPI-1047: Cannot locate a 64-bit Oracle Client library: "libclntsh.so: cannot open shared object file: No such file or directory". See https://oracle.github.io/odpi/doc/installation.html#linux for help`)
	err := classifyConnectError(mustDSN(t, "oracle://scott:tiger@h:1521/s"), cause)
	msg := err.Error()
	for _, want := range []string{"DPI-1047", "Oracle Instant Client Basic", "LD_LIBRARY_PATH", "ldconfig"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "tiger") || problem.ExitCode(err) != problem.ExitFailure {
		t.Errorf("error %q exit %d", msg, problem.ExitCode(err))
	}
}

func TestClassifyLogonDenied(t *testing.T) {
	err := classifyConnectError(mustDSN(t, "oracle://scott:tiger@h:1521/s"), &oraErr{1017})
	if problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(err.Error(), "password") {
		t.Errorf("ORA-01017: %v (exit %d)", err, problem.ExitCode(err))
	}
}
