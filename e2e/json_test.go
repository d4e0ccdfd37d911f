package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// jsonDoc is one documented document of docs/json.md: for each path, the
// keys in order.
type jsonDoc map[string][]string

// documented reads the ```keys COMMAND blocks of docs/json.md.
func documented(t *testing.T) map[string]jsonDoc {
	t.Helper()
	b, err := os.ReadFile("../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]jsonDoc{}
	var cur jsonDoc
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```keys "):
			cur = jsonDoc{}
			docs[strings.TrimPrefix(line, "```keys ")] = cur
		case line == "```":
			cur = nil
		case cur != nil && strings.Contains(line, ":"):
			path, keys, _ := strings.Cut(line, ":")
			cur[path] = strings.Fields(keys)
		}
	}
	return docs
}

// keysOf walks a JSON document keeping key order: for each path (as in
// docs/json.md) the keys of every object found there.
func keysOf(t *testing.T, doc string) map[string][][]string {
	t.Helper()
	out := map[string][][]string{}
	dec := json.NewDecoder(strings.NewReader(doc))
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		var keys []string
		for dec.More() {
			child := path + "[]"
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				keys = append(keys, k.(string))
				child = k.(string)
				if path != "." {
					child = path + "." + child
				}
			}
			if err := walk(child); err != nil {
				return err
			}
		}
		if d == '{' {
			out[path] = append(out[path], keys)
		}
		_, err = dec.Token()
		return err
	}
	if err := walk("."); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	return out
}

var timestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// Every command's JSON document on SQLite, PostgreSQL and MariaDB, against
// docs/json.md: the documented keys in the documented order, timestamps in
// one format, durations in _ms, no HTML escaping.
func TestJSONDocuments(t *testing.T) {
	t.Parallel()
	docs := documented(t)
	testdb.Each(t, func(t *testing.T, dsn string) {
		checked := map[string]bool{}
		check := func(name string, args ...string) string {
			t.Helper()
			r := loanq(t, dsn, "ana", append([]string{"--output", "json"}, args...)...)
			if r.code != 0 && r.code != 75 {
				t.Fatalf("%s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
			}
			doc, ok := docs[name]
			if !ok {
				t.Fatalf("docs/json.md has no block for %q", name)
			}
			checked[name] = true
			got := keysOf(t, r.stdout)
			for path, want := range doc {
				objs := got[path]
				if len(objs) == 0 && !strings.Contains(path, "[]") {
					t.Errorf("%s: no object at %s\n%s", name, path, r.stdout)
				}
				for _, keys := range objs {
					if len(want) == 1 && want[0] == "*" {
						continue
					}
					var must []string
					for _, k := range want {
						if !strings.HasSuffix(k, "?") || hasKey(keys, strings.TrimSuffix(k, "?")) {
							must = append(must, strings.TrimSuffix(k, "?"))
						}
					}
					if strings.Join(keys, " ") != strings.Join(must, " ") {
						t.Errorf("%s at %s: keys\n  %s\nwant (docs/json.md)\n  %s", name, path, strings.Join(keys, " "), strings.Join(must, " "))
					}
				}
			}
			for path := range got {
				if _, ok := doc[path]; !ok && !underData(doc, path) {
					t.Errorf("%s: object at %s is not in docs/json.md", name, path)
				}
			}
			conventions(t, name, r.stdout)
			return r.stdout
		}

		check("migrate up", "migrate", "up")
		check("demo seed", "demo", "seed", "--loans", "60")
		check("task create", "task", "create", "big", "--where", "amount > 0", "--order", "amount DESC")
		if out := check("task list", "task", "list"); !strings.Contains(out, `"amount > 0"`) {
			t.Errorf("task list: '>' escaped or missing:\n%s", out)
		}
		var req request
		out := check("work get", "work", "get", "big", "--count", "2")
		if err := json.Unmarshal([]byte(out), &req); err != nil || len(req.Loans) != 2 {
			t.Fatalf("work get: %v %s", err, out)
		}
		check("work status", "work", "status", itoa64(req.RequestID))
		check("work cancel", "work", "cancel", itoa64(req.RequestID)) // served first: printed as served
		check("work next", "work", "next", "--count", "1")
		check("pipeline", "pipeline")
		check("work reclaim", "work", "reclaim", "big", "--dry-run")
		check("disposition", "disposition", "big", itoa64(req.Loans[0]), "return", "--after", "90m")
		check("disposition", "disposition", "big", itoa64(req.Loans[1]), "complete")
		out = check("work get", "work", "get", "big", "--count", "2")
		if err := json.Unmarshal([]byte(out), &req); err != nil || len(req.Loans) != 2 {
			t.Fatalf("work get: %v %s", err, out)
		}
		check("disposition, several loans", "disposition", "big", itoa64(req.Loans[0]), itoa64(req.Loans[1]), "return", "--after", "90m")
		// A stream: one document per line, each with the documented keys.
		lines := loanq(t, dsn, "ana", "history", "--output", "json", "--settle", "0s")
		if lines.code != 0 || strings.Count(lines.stdout, "\n") < 4 {
			t.Fatalf("history: exit %d, %d lines\n%s%s", lines.code, strings.Count(lines.stdout, "\n"), lines.stdout, lines.stderr)
		}
		checked["history"] = true
		for _, line := range strings.Split(strings.TrimSuffix(lines.stdout, "\n"), "\n") {
			got := keysOf(t, line)
			for path, want := range docs["history"] {
				for _, keys := range got[path] {
					if strings.Join(keys, " ") != strings.Join(want, " ") {
						t.Errorf("history at %s: keys\n  %s\nwant (docs/json.md)\n  %s", path, strings.Join(keys, " "), strings.Join(want, " "))
					}
				}
			}
			if len(got["."]) != 1 || len(got) != 1 {
				t.Errorf("history: a line is not one flat object: %s", line)
			}
			conventions(t, "history", line)
		}
		check("task update", "task", "update", "big", "--max-active", "5", "--max-hold", "8h")
		check("task show", "task", "show", "big")
		check("group add", "group", "add", "seniors", "ana", "bob")
		check("group list", "group", "list")
		check("group remove", "group", "remove", "seniors", "bob")
		check("task stats", "task", "stats")
		check("prune", "prune", "--task", "big", "--dry-run")
		check("explain", "explain", "big")
		check("migrate status", "migrate", "status")
		check("sql", "sql")
		check("version", "version")
		check("demo", "demo", "--duration", "1s", "--loans", "60", "--processors", "2")
		mustOK(t, dsn, "admin", "task", "create", "gone", "--where", "amount > 0")
		check("task delete", "task", "delete", "gone")
		check("migrate down", "migrate", "down")
		for name := range docs {
			if !checked[name] {
				t.Errorf("docs/json.md documents %q, which this test did not run", name)
			}
		}
	})
}

func hasKey(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// underData: path lies below a documented "*" object (keys that are data).
func underData(doc jsonDoc, path string) bool {
	for p, keys := range doc {
		if len(keys) == 1 && keys[0] == "*" && strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// conventions: timestamps, durations and escaping anywhere in a document.
func conventions(t *testing.T, name, doc string) {
	t.Helper()
	if bytes.Contains([]byte(doc), []byte(`\u003e`)) || bytes.Contains([]byte(doc), []byte(`\u003c`)) || bytes.Contains([]byte(doc), []byte(`\u0026`)) {
		t.Errorf("%s: HTML-escaped characters:\n%s", name, doc)
	}
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var walk func(key string, v any, parent map[string]any)
	walk = func(key string, v any, parent map[string]any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(k, c, x)
			}
		case []any:
			for _, c := range x {
				walk(key, c, nil)
			}
		case string:
			if strings.HasSuffix(key, "_at") && x != "" && !timestamp.MatchString(x) {
				t.Errorf("%s: %s = %q is not RFC 3339 UTC with milliseconds", name, key, x)
			}
		}
		if parent != nil && strings.HasSuffix(key, "_seconds") {
			if _, ok := parent[strings.TrimSuffix(key, "_seconds")+"_ms"]; !ok {
				t.Errorf("%s: %s has no _ms twin", name, key)
			}
		}
	}
	walk("", v, nil)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
