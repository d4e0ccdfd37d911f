package drivers

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/migrations"
)

// The bound of "Abandoned requests" is written as a literal where it is
// used as text: in the statements (requestAliveMS) and in the database's own
// checks of migration 00016 (a policy, triggers). They must all say
// RequestAlive.
func TestRequestAliveLiteral(t *testing.T) {
	if ms := strconv.FormatInt(RequestAlive.Milliseconds(), 10); ms != requestAliveMS {
		t.Errorf("requestAliveMS is %s, RequestAlive is %s ms", requestAliveMS, ms)
	}
	s := strconv.Itoa(int(RequestAlive.Seconds()))
	for dialect, want := range map[string]string{
		"postgres": "INTERVAL '" + s + " seconds'",
		"mysql":    "INTERVAL " + s + " SECOND",
		"oracle":   "NUMTODSINTERVAL(" + s + ", 'SECOND')",
	} {
		text, err := fs.ReadFile(migrations.For(dialect), "00016_request_alive.sql")
		if err != nil {
			t.Fatal(err)
		}
		up, _, _ := strings.Cut(string(text), "-- +goose Down")
		if !strings.Contains(up, want) {
			t.Errorf("%s's migration 00016 does not say the bound as %q", dialect, want)
		}
	}
	if got := Portable().RequestsPending.SQL; !strings.Contains(got, `{{requestAlive "alive_at"}}`) {
		t.Errorf("RequestsPending does not check the bound: %s", got)
	}
	got, err := renderTemplate(fakeDialect{}, "alive", `{{requestAlive "a"}} {{requestStale "a"}}`)
	if want := "a > MINUS(" + requestAliveMS + ") (a IS NULL OR a <= MINUS(" + requestAliveMS + "))"; err != nil || got != want {
		t.Errorf("the bound as statements say it: %q, %v; want %q", got, err, want)
	}
}
