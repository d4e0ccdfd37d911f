package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// chromium finds Debian's headless browser. Missing, it fails the test
// saying what to install when LOANQ_TEST_REQUIRE names chromium (as
// scripts/test.sh, `make test` and CI do, like a missing database server),
// and skips it otherwise. scripts/test.sh installs it when run as root.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOANQ_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "the dashboard's browser test needs a headless Chromium: install Debian's package (apt-get install chromium), " +
		"run the tests through scripts/test.sh as root (it installs it), or set LOANQ_TEST_CHROMIUM to the browser's path"
	if testdb.Required("chromium") {
		t.Fatal(msg)
	}
	t.Skip(msg + " (LOANQ_TEST_REQUIRE does not name chromium, so this run skips it)")
	return ""
}

// TestDashboardInBrowser drives Debian's chromium, headless, through the
// dashboard: the page loads through a ?token= link, shows the tasks and the
// processors, updates itself (by fetch, without reloading) after new work is
// assigned, and shows a task and a user named with markup as text, on the
// dashboard and on the task's page. LOANQ_DASHBOARD_SCREENSHOT=FILE.png saves
// the page (docs/dashboard.png is made that way).
func TestDashboardInBrowser(t *testing.T) {
	// No t.Parallel: it drives chromium, which is heavy on this machine's two cores.
	browser := chromium(t)
	dsn := testdb.Fresh(t, "sqlite")
	// A short demo run leaves a realistic history: criteria runs (one task
	// with a 300 ms query), dispositions of every kind, six processors.
	mustOK(t, dsn, "admin", "demo", "--loans", "600", "--duration", "3s")
	d, db := testdb.Open(t, dsn)

	// Some work in every state: active, returned, done, never; pending.
	work := []struct {
		user, task string
		n          int
	}{{"ana", "verify-bank", 4}, {"ben", "verify-bank", 3}, {"chloe", "call-borrower", 5}, {"dev", "big-loans", 3},
		{"ana", "call-borrower", 2}, {"eli", "verify-bank", 6}}
	for _, w := range work {
		r := decode(t, mustOK(t, dsn, w.user, "--output", "json", "work", "get", w.task, "--count", fmt.Sprint(w.n)))
		for i, loan := range r.Loans {
			switch {
			case i == 0:
				mustOK(t, dsn, w.user, "disposition", w.task, fmt.Sprint(loan), "complete")
			case i == 1 && w.n > 3:
				mustOK(t, dsn, w.user, "disposition", w.task, fmt.Sprint(loan), "return", "--after", "1h")
			case i == 2 && w.n > 4:
				mustOK(t, dsn, w.user, "disposition", w.task, fmt.Sprint(loan), "never")
			}
		}
	}
	// eli has held work for three hours: past the --stale-after limit.
	if _, err := db.Exec(`UPDATE loanq_work SET assigned_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-3 hours')
		WHERE user_name = 'eli' AND disposition IS NULL`); err != nil {
		t.Fatal(err)
	}
	const token = "browser-tok-77"
	// With --api, as a team that serves processors runs it: the dashboard
	// then links the processor's page (docs/dashboard.png shows it).
	s := startServeEnv(t, dsn, []string{"LOANQ_SERVE_TOKEN=" + token}, "--stale-after", "1h", "--cache", "1s", "--api")

	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1440, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.url+"/?token="+token),
		chromedp.WaitVisible(`#tasks tbody tr[data-task]`),
	); err != nil {
		t.Fatalf("loading the dashboard in chromium: %v", err)
	}
	tasks := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#tasks tbody tr[data-task] td.name a')).map(a => a.textContent)`)
	users := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#users tbody tr[data-user] td.name')).map(a => a.textContent)`)
	loc := eval[string](t, ctx, `location.href`)
	want := []string{"big-loans", "call-borrower", "verify-bank"}
	if strings.Join(tasks, "|") != strings.Join(want, "|") {
		t.Errorf("tasks on the page: %q, want %q", tasks, want)
	}
	for _, u := range []string{"ana", "ben", "chloe", "dev", "eli"} {
		if !contains(users, u) {
			t.Errorf("user %q is not in the processors table %q", u, users)
		}
	}
	if strings.Contains(loc, token) {
		t.Errorf("the token stayed in the address bar: %s", loc)
	}
	if link := eval[string](t, ctx, `(document.querySelector('header a.work-link') || {}).getAttribute?.('href') || ''`); link != "/work" {
		t.Errorf("the processor's page link of serve --api: href %q, want /work", link)
	}
	if backlog := eval[string](t, ctx, `(document.querySelector('#tasks thead') || {}).textContent || ''`); !strings.Contains(backlog, "Backlog") {
		t.Errorf("the tasks table has no Backlog column: %q", backlog)
	}
	if over := eval[string](t, ctx, `(document.querySelector('#users tr.row-over td.name') || {}).textContent || ''`); over != "eli" {
		t.Errorf("highlighted processor: %q, want eli (work held 3h, --stale-after 1h)", over)
	}

	// New work appears without a reload: a marker set on the page survives.
	eval[int](t, ctx, `window.__marker = 42`)
	mustOK(t, dsn, "zoe", "work", "get", "call-borrower", "--count", "2")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector('#users tr[data-user="zoe"]')`,
		chromedp.WithPollingTimeout(45*time.Second))); err != nil {
		t.Fatalf("the dashboard did not show zoe's new work within 45s: %v", err)
	}
	if marker := eval[int](t, ctx, `window.__marker || 0`); marker != 42 {
		t.Errorf("the page reloaded to update (marker lost); it should fetch /api/dashboard instead")
	}

	shot := os.Getenv("LOANQ_DASHBOARD_SCREENSHOT")
	if shot != "" {
		screenshot(t, ctx, shot)
	}

	// A task whose name holds markup, written past the CLI's name check as a
	// hostile or careless writer of the table could, and a user named with markup.
	const evilTask = `<script>window.__pwned=1</script>`
	const evilUser = `<img src=x onerror="window.__pwned=2">`
	st := d.Statements()
	if _, err := st.TaskInsert.InsertID(context.Background(), db, engineio.TaskInsertParams{
		Name: evilTask, Source: "loan", Key: "id", Criteria: "amount < 100000 AND borrower_contacted = 1", Order: "amount",
		LockStrategy: "lease", LeaseTTLMS: int64(time.Minute / time.Millisecond), CreatedBy: "admin", KeyKind: "integer",
	}); err != nil {
		t.Fatal(err)
	}
	mustOK(t, dsn, evilUser, "work", "get", "call-borrower", "--count", "2")
	// It appears through the page's own refresh (fetch, textContent) …
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('#tasks tbody tr[data-task]').length === 4`,
		chromedp.WithPollingTimeout(45*time.Second))); err != nil {
		t.Fatalf("the dashboard did not show the new task within 45s: %v", err)
	}
	noMarkup := func(where string) {
		t.Helper()
		tasks := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#tasks tbody tr[data-task] td.name a')).map(a => a.textContent)`)
		users := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#users tbody tr[data-user] td.name')).map(a => a.textContent)`)
		pwned := eval[bool](t, ctx, `window.__pwned !== undefined`)
		scripts := eval[int](t, ctx, `document.scripts.length`)
		imgs := eval[int](t, ctx, `document.images.length`)
		if !contains(tasks, evilTask) || !contains(users, evilUser) {
			t.Errorf("%s: the task and user named with markup are not shown as text: tasks %q users %q", where, tasks, users)
		}
		if pwned || scripts != 2 || imgs != 0 {
			t.Fatalf("%s: markup from the database ran or became HTML: __pwned set %v, %d script elements (want 2), %d images (want 0)",
				where, pwned, scripts, imgs)
		}
	}
	noMarkup("after a refresh")
	// … and on a fresh load, from the figures the server embeds in the page.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(`#tasks tbody tr[data-task]`)); err != nil {
		t.Fatal(err)
	}
	noMarkup("on a fresh load")

	// The task page of the markup-named task: the name is text there too.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/tasks/"+url.PathEscape(evilTask)), chromedp.WaitVisible(`h1`)); err != nil {
		t.Fatal(err)
	}
	h1 := eval[string](t, ctx, `document.querySelector('h1').textContent`)
	if h1 != evilTask || eval[bool](t, ctx, `window.__pwned !== undefined`) {
		t.Errorf("task page heading %q (want the name as text), or its script ran", h1)
	}
	if shot != "" {
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/tasks/verify-bank"), chromedp.WaitVisible(`h1`)); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, filepath.Join(filepath.Dir(shot), "dashboard-task.png"))
	}

	// More tasks than --max-tasks: the page shows the busiest and says how
	// many it left out, from the embedded figures and after each refresh.
	bounded := startServe(t, dsn, "--max-tasks", "2", "--cache", "1s")
	if err := chromedp.Do(ctx, chromedp.Navigate(bounded.url+"/"), chromedp.WaitVisible(`#omitted`)); err != nil {
		t.Fatalf("the page with --max-tasks 2 does not show what it left out: %v", err)
	}
	note := eval[string](t, ctx, `document.getElementById('omitted').textContent`)
	rows := eval[int](t, ctx, `document.querySelectorAll('#tasks tbody tr[data-task]').length`)
	if rows != 2 || !strings.Contains(note, "the 2 busiest of 4 tasks") {
		t.Errorf("--max-tasks 2 over 4 tasks: %d rows, note %q; want 2 rows and a note naming the 2 busiest of 4 tasks", rows, note)
	}
	if shot != "" {
		screenshot(t, ctx, filepath.Join(filepath.Dir(shot), "dashboard-bounded.png"))
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s in chromium: %v", js, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot saved to %s", path)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
