package oracle

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
)

func mustDSN(t *testing.T, raw string) dsn.DSN {
	t.Helper()
	_, d, err := drivers.ParseDSN(raw)
	if err != nil {
		t.Fatalf("ParseDSN(%q): %v", raw, err)
	}
	return d
}

func TestConnectParams(t *testing.T) {
	const secret = "s3cr@t:/pw"
	d := mustDSN(t, "oracle://scott:s3cr%40t%3A%2Fpw@db.example:1521/XEPDB1?poolMaxSessions=7&timezone=Europe/Berlin")
	P, err := ConnectParams(d)
	if err != nil {
		t.Fatal(err)
	}
	if P.Username != "scott" || P.Password.Secret() != secret {
		t.Errorf("user %q password %q", P.Username, P.Password.Secret())
	}
	if P.ConnectString != "db.example:1521/XEPDB1" {
		t.Errorf("connect string %q, want Easy Connect host:port/service", P.ConnectString)
	}
	if P.MaxSessions != 7 {
		t.Errorf("query parameters are not passed to godror: poolMaxSessions %d", P.MaxSessions)
	}
	if P.Timezone != time.UTC {
		t.Errorf("timezone %v, want UTC whatever the DSN says", P.Timezone)
	}
	if len(P.AlterSession) != 1 || P.AlterSession[0] != [2]string{"TIME_ZONE", "UTC"} {
		t.Errorf("alter session %v", P.AlterSession)
	}
	for _, s := range []string{P.String(), P.StringNoClass(), fmt.Sprintf("%v", P), fmt.Sprintf("%+v", P), d.Redacted()} {
		if strings.Contains(s, "s3cr") {
			t.Errorf("password in a printable form: %s", s)
		}
	}
}

func TestConnectParamsErrorHidesPassword(t *testing.T) {
	// ParseDSN builds godror's parameters, so the bad option is refused
	// before any connection, without the password.
	_, err := (&Driver{}).ParseDSN("oracle://scott:tiger@db.example:1521/XEPDB1?poolMaxSessions=lots")
	if err == nil {
		t.Fatal("a bad pool size was accepted")
	}
	if strings.Contains(err.Error(), "tiger") || !strings.Contains(err.Error(), "malformed Oracle DSN") {
		t.Errorf("error %q", err)
	}
}

// oraErr has the method godror's *OraErr has.
type oraErr struct{ code int }

func (e *oraErr) Error() string { return fmt.Sprintf("ORA-%05d: test", e.code) }
func (e *oraErr) Code() int     { return e.code }

func TestErrorCodes(t *testing.T) {
	d := &Driver{}
	wrap := func(code int) error { return fmt.Errorf("query: %w", &oraErr{code}) }
	for code, busy := range map[int]bool{54: true, 30006: true, 1: false, 60: false, 0: false} {
		if got := d.IsLockBusy(wrap(code)); got != busy {
			t.Errorf("IsLockBusy(ORA-%05d) = %v", code, got)
		}
	}
	for code, uniq := range map[int]bool{1: true, 54: false, 2291: false} {
		if got := d.IsUniqueViolation(wrap(code)); got != uniq {
			t.Errorf("IsUniqueViolation(ORA-%05d) = %v", code, got)
		}
	}
	if d.IsLockBusy(errors.New("ORA-00054 as plain text")) || d.IsUniqueViolation(nil) || OraCode(nil) != 0 {
		t.Error("an error without a code matched")
	}
}

func TestRegistered(t *testing.T) {
	for _, s := range []string{"oracle"} {
		d, err := drivers.Lookup(s)
		if err != nil || d.Name() != "oracle" {
			t.Fatalf("Lookup(%s): %v", s, err)
		}
	}
	if d, err := drivers.ByName("oracle"); err != nil || d.Statements().LockSkip.Empty() {
		t.Fatalf("ByName(oracle): %v", err)
	}
}
