package mysql_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers/mysql"
)

var updateDataLocks = flag.Bool("update", false, "rewrite testdata/mysql8/data_locks.sql from the current code")

// MySQL 8's performance_schema.data_locks is what `loanq explain` lists a
// probe claim's InnoDB locks from (gap and next-key locks included). No
// MySQL 8 server runs where loanq is built: the statement is pinned here as
// exact text (testdata/mysql8/data_locks.sql; review a change, then rewrite
// it with -update), and MariaDB, which has no such table, is checked to be
// told apart (readable = false, no error) on a real server.
func TestDataLocksExactText(t *testing.T) {
	golden := filepath.Join("..", "..", "testdata", "mysql8", "data_locks.sql")
	if *updateDataLocks {
		if err := os.WriteFile(golden, []byte(mysql.DataLocksSQL+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with go test ./drivers/mysql -run DataLocks -update)", err)
	}
	if got := mysql.DataLocksSQL + "\n"; got != string(want) {
		t.Errorf("the data_locks statement changed; review it and run with -update:\n got: %s\nwant: %s", got, want)
	}
}

func TestDataLocksOnMariaDB(t *testing.T) {
	ctx := context.Background()
	d, db := openFresh(t)
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	id, err := d.ConnectionID(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	locks, readable, err := d.DataLocks(ctx, db, id)
	if err != nil {
		t.Fatalf("DataLocks on %s: %v", version, err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") && (readable || len(locks) != 0) {
		t.Errorf("DataLocks on %s: readable %v, %d locks; MariaDB has no performance_schema.data_locks", version, readable, len(locks))
	}
}
