package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/loanq/loanq/drivers"
)

// A path holding '#' or '%' opens that very file: inside SQLite's URI
// filename those characters would end the path, and loanq would open (and
// migrate) another file, named by the part before them.
func TestPathWithURICharactersOpensThatFile(t *testing.T) {
	for _, dir := range []string{"team#2", "100%", "a%23b", "x#y%3f"} {
		t.Run(dir, func(t *testing.T) {
			root := t.TempDir()
			folder := filepath.Join(root, dir)
			if err := os.Mkdir(folder, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(folder, "loanq.db")
			_, db, _, err := drivers.Connect(context.Background(), "sqlite:"+path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("CREATE TABLE marker (x INTEGER)"); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the database was not created at %s: %v", path, err)
			}
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				if e.Name() != dir {
					t.Errorf("another file was opened beside the folder: %s", e.Name())
				}
			}
		})
	}
}
