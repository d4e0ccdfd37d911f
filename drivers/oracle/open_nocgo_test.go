//go:build !cgo

package oracle

import (
	"context"
	"strings"
	"testing"

	"github.com/loanq/loanq/problem"
)

// Run with CGO_ENABLED=0 go test ./drivers/oracle.
func TestOpenWithoutCgo(t *testing.T) {
	_, err := (&Driver{}).Open(context.Background(), mustDSN(t, "oracle://scott:tiger@127.0.0.1:1521/XEPDB1"))
	if err == nil {
		t.Fatal("Open succeeded in a build without cgo")
	}
	msg := err.Error()
	for _, want := range []string{"without cgo", "CGO_ENABLED=1 go build", "Instant Client", "oracle://scott:***@127.0.0.1:1521/XEPDB1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "tiger") {
		t.Errorf("password in %q", msg)
	}
	if problem.ExitCode(err) != problem.ExitUsage {
		t.Errorf("exit code %d, want %d", problem.ExitCode(err), problem.ExitUsage)
	}
}
