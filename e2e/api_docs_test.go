package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// docsHost is the address the examples of docs/api.md were recorded on.
const docsHost = "http://127.0.0.1:18099"

// curlExample is one `$ curl …` line of docs/api.md and the answer shown
// under it.
type curlExample struct {
	line, answer string
}

// curlExamples reads the examples: every line starting with "$ curl" in a
// fenced block, up to the next "$ " line or the fence.
func curlExamples(t *testing.T) []curlExample {
	t.Helper()
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []curlExample
	var cur *curlExample
	var answer []string
	flush := func() {
		if cur != nil {
			cur.answer = strings.Join(answer, "\n")
			out = append(out, *cur)
		}
		cur, answer = nil, nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "$ "):
			flush()
			if strings.HasPrefix(l, "$ curl ") {
				cur = &curlExample{line: strings.TrimPrefix(l, "$ ")}
			}
		case strings.HasPrefix(l, "```"):
			flush()
		case cur != nil:
			answer = append(answer, l)
		}
	}
	return out
}

// TestAPIDocsCurlExamples runs every curl line of docs/api.md with curl
// against a real `loanq serve --api` process on the sample data, and checks
// each answer against the one documented (the placeholders are explained at
// the end of docs/api.md's Examples). curl is required: without it the test
// fails, saying to install it.
func TestAPIDocsCurlExamples(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("the docs/api.md examples are run with curl, which is not installed: apt-get install curl (or put it on PATH)")
	}
	examples := curlExamples(t)
	if len(examples) < 10 {
		t.Fatalf("found %d curl examples in docs/api.md, want at least 10", len(examples))
	}
	testdb.Each(t, func(t *testing.T, dsn string) {
		mustOK(t, dsn, "root", "demo", "seed")
		var tok = map[string]string{}
		for user, role := range map[string]string{"ana": "processor", "sam": "supervisor"} {
			var issued struct {
				Token string `json:"token"`
			}
			if err := json.Unmarshal([]byte(mustOK(t, dsn, "root", "-o", "json", "token", "create", "--user", user, "--role", role).stdout), &issued); err != nil {
				t.Fatal(err)
			}
			tok[user] = issued.Token
		}
		s := startServe(t, dsn, "--api", "--auth", "token")
		ids := map[string]map[int64]int64{"request": {}, "loan": {}}
		pathID := regexp.MustCompile(`/(requests|loans)/(\d+)`)
		for _, ex := range examples {
			line := strings.ReplaceAll(ex.line, docsHost, s.url)
			line = pathID.ReplaceAllStringFunc(line, func(m string) string {
				p := pathID.FindStringSubmatch(m)
				kind := strings.TrimSuffix(p[1], "s")
				n, _ := strconv.ParseInt(p[2], 10, 64)
				if v, ok := ids[kind][n]; ok {
					return fmt.Sprintf("/%s/%d", p[1], v)
				}
				t.Fatalf("docs/api.md: %q uses %s id %d before an answer showed it", ex.line, kind, n)
				return m
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			headers := filepath.Join(t.TempDir(), "headers")
			cmd := exec.CommandContext(ctx, "sh", "-c", line+` -D "$HEADERS" -w '\n@@status %{http_code}\n'`)
			cmd.Env = append(os.Environ(), "TOKEN="+tok["ana"], "SUPERVISOR_TOKEN="+tok["sam"], "PATH="+pathOf(curl), "HEADERS="+headers)
			out, err := cmd.Output()
			cancel()
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			got, status, _ := strings.Cut(strings.ReplaceAll(string(out), "\r", ""), "\n@@status ")
			code, _ := strconv.Atoi(strings.TrimSpace(status))
			if msg := compareAnswer(ex.answer, got, code, ids); msg != "" {
				t.Errorf("docs/api.md: %s\n%s\ngot (status %d):\n%s", ex.line, msg, code, got)
			}
			// The answer curl got is one the OpenAPI document allows.
			method, path := curlCall(line)
			body := got
			if strings.Contains(line, " -i ") {
				_, body, _ = strings.Cut(got, "\n\n")
			}
			if err := checkSpec(method, path, code, dumpedHeaders(t, headers), []byte(body)); err != nil {
				t.Errorf("docs/api.md: %s\nagainst web/openapi.json: %v", ex.line, err)
			}
		}
	})
}

// curlCall is the method and path (with its query) a curl line calls: -X
// METHOD, else POST with -d, else GET.
func curlCall(line string) (string, string) {
	method := "GET"
	if m := regexp.MustCompile(`-X (\w+)`).FindStringSubmatch(line); m != nil {
		method = m[1]
	} else if strings.Contains(line, " -d ") {
		method = "POST"
	}
	u, err := url.Parse(strings.Trim(regexp.MustCompile(`https?://[^\s']+`).FindString(line), `"`))
	if err != nil {
		return method, ""
	}
	return method, u.RequestURI()
}

// dumpedHeaders reads the headers curl -D wrote (the last answer's).
func dumpedHeaders(t *testing.T, file string) http.Header {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
		if strings.HasPrefix(l, "HTTP/") {
			h = http.Header{}
			continue
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			h.Add(k, strings.TrimSpace(v))
		}
	}
	return h
}

// pathOf is PATH with curl's directory first.
func pathOf(curl string) string {
	dir := curl[:strings.LastIndex(curl, "/")]
	return dir + ":" + os.Getenv("PATH")
}

// compareAnswer checks an actual curl answer against the documented one;
// "" when they agree.
func compareAnswer(want, got string, code int, ids map[string]map[int64]int64) string {
	want = strings.TrimSpace(want)
	got = strings.TrimSpace(got)
	wantBody, gotBody := want, got
	wantStatus := 200
	if strings.HasPrefix(want, "HTTP/") {
		// curl -i: the status line and the headers shown, then the body.
		wh, wb, _ := strings.Cut(want, "\n\n")
		gh, gb, _ := strings.Cut(got, "\n\n")
		wantBody, gotBody = wb, gb
		wl, gl := strings.Split(wh, "\n"), strings.Split(gh, "\n")
		if wl[0] != gl[0] {
			return fmt.Sprintf("status line %q, documented %q", gl[0], wl[0])
		}
		wantStatus, _ = strconv.Atoi(strings.Fields(wl[0])[1])
		have := map[string]string{}
		for _, h := range gl[1:] {
			k, v, _ := strings.Cut(h, ": ")
			have[strings.ToLower(k)] = v
		}
		for _, h := range wl[1:] {
			k, v, _ := strings.Cut(h, ": ")
			g, ok := have[strings.ToLower(k)]
			switch {
			case !ok:
				return fmt.Sprintf("header %s missing", k)
			case strings.EqualFold(k, "Date") || strings.EqualFold(k, "Content-Length"):
			case g != v:
				return fmt.Sprintf("header %s: %q, documented %q", k, g, v)
			}
		}
	}
	var w, g any
	if err := json.Unmarshal([]byte(wantBody), &w); err != nil {
		return fmt.Sprintf("the documented answer is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(gotBody), &g); err != nil {
		return fmt.Sprintf("the answer is not JSON: %v", err)
	}
	if m, ok := w.(map[string]any); ok && m["type"] != nil && m["status"] != nil {
		wantStatus = int(m["status"].(float64))
	}
	if code != wantStatus {
		return fmt.Sprintf("HTTP status %d, documented %d", code, wantStatus)
	}
	return compareJSON("", w, g, ids)
}

// volatile keys are checked for their type only; id keys are learned (the
// first documented value maps to the actual one, later ones must agree).
var volatile = map[string]bool{"created_at": true, "assigned_at": true, "disposed_at": true, "return_at": true, "age_seconds": true, "age_ms": true}
var idKind = map[string]string{"request_id": "request", "loan_id": "loan", "loans": "loan"}

func compareJSON(key string, w, g any, ids map[string]map[int64]int64) string {
	if fmt.Sprintf("%T", w) != fmt.Sprintf("%T", g) {
		return fmt.Sprintf("%s: %v (%T), documented %v (%T)", key, g, g, w, w)
	}
	if volatile[key] {
		return ""
	}
	switch wv := w.(type) {
	case map[string]any:
		gv := g.(map[string]any)
		if len(wv) != len(gv) {
			return fmt.Sprintf("%s: keys %v, documented %v", key, mapKeys(gv), mapKeys(wv))
		}
		for k := range wv {
			if _, ok := gv[k]; !ok {
				return fmt.Sprintf("%s: key %s missing", key, k)
			}
			if msg := compareJSON(k, wv[k], gv[k], ids); msg != "" {
				return msg
			}
		}
	case []any:
		gv := g.([]any)
		if len(wv) != len(gv) {
			return fmt.Sprintf("%s: %d items, documented %d", key, len(gv), len(wv))
		}
		for i := range wv {
			if msg := compareJSON(key, wv[i], gv[i], ids); msg != "" {
				return msg
			}
		}
	case float64:
		if kind, ok := idKind[key]; ok {
			wn, gn := int64(wv), int64(g.(float64))
			if v, seen := ids[kind][wn]; seen && v != gn {
				return fmt.Sprintf("%s: %d, but the documented %d was %d before", key, gn, wn, v)
			}
			ids[kind][wn] = gn
			return ""
		}
		if wv != g.(float64) {
			return fmt.Sprintf("%s: %v, documented %v", key, g, wv)
		}
	default:
		if w != g {
			return fmt.Sprintf("%s: %v, documented %v", key, g, w)
		}
	}
	return ""
}

func mapKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
