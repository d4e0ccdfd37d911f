package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// TestWorkPageInBrowser drives Debian's chromium, headless, through the
// processor's page of two `loanq serve --api` processes on one database:
// four browser contexts (their own cookie jars), two users signed in on each
// node, click Get Work at once on a task whose criteria query takes 2 s.
// Each page shows "looking…" while its request is pending and replaces it,
// without a reload, by the loans it got: distinct across the four, as the
// database says. Complete removes a loan from the pipeline and adds it to
// the day's history. Then the page's own endpoints refuse what they must:
// another user's request or loan (403), a POST without the CSRF token
// (403), a cross-site POST from another origin (nothing logged), and an
// expired session brings the sign-in form back. Loan keys holding markup
// (a text-keyed task) are shown as text: no element injected, no script run.
// LOANQ_WORK_SCREENSHOT=DIR saves docs/work-*.png into DIR.
func TestWorkPageInBrowser(t *testing.T) {
	// No t.Parallel: it drives chromium (four contexts) on two nodes clicking at once within a 2 s query.
	browser := chromium(t)
	for _, dialect := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(dialect, func(t *testing.T) { workPageInBrowser(t, browser, dialect) })
	}
}

func workPageInBrowser(t *testing.T, browser, dialect string) {
	dsn := testdb.Fresh(t, dialect)
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, 60)
	lock := "skip"
	if dialect == "sqlite" {
		lock = "lease"
	}
	mustOK(t, dsn, "admin", "task", "create", "verify-bank", "--where", "eligible = 1", "--order", "priority",
		"--lock", lock, "--query-delay", "2s")
	mustOK(t, dsn, "admin", "task", "create", "call-borrower", "--where", "eligible = 1", "--order", "priority DESC")
	// A task keyed by text holding markup: the page must show it as text.
	markupKeys := []string{`<img src=x onerror="window.__xss=1">`, `</td><script>window.__xss=2</script>`}
	testdb.Exec(t, d, db, "CREATE TABLE markup_loans (ref VARCHAR(200) NOT NULL PRIMARY KEY, prio INTEGER NOT NULL)")
	for _, k := range markupKeys {
		testdb.Exec(t, d, db, "INSERT INTO markup_loans (ref, prio) VALUES (?, 1)", k)
	}
	mustOK(t, dsn, "admin", "task", "create", "markup", "--source", "markup_loans", "--key", "ref", "--where", "prio = 1", "--order", "ref")
	e := newEngine(db, d)
	users := []string{"ana", "bob", "cy", "dee"}
	tokens := map[string]string{}
	for _, u := range users {
		tok, err := e.Admin().CreateToken(context.Background(), u, "processor", "admin", 0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tok.Token
	}
	nodes := []*server{startServe(t, dsn, "--api"), startServe(t, dsn, "--api")}

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
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	root, cancelR := chromedp.NewContext(actx)
	defer cancelR()
	if err := chromedp.Do(root); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	root, cancelT := context.WithTimeout(root, 3*time.Minute)
	defer cancelT()

	// One browser context per user: its own cookies, as four people's
	// browsers have. ana and bob use node 0, cy and dee node 1.
	tabs := make([]context.Context, len(users))
	for i, u := range users {
		ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
		defer cancel()
		tabs[i] = ctx
		node := nodes[i/2].url
		if err := chromedp.Do(ctx,
			chromedp.Navigate(node+"/work"),
			chromedp.WaitVisible(chromedp.CSS(`#token`)),
			chromedp.SendKeys(chromedp.CSS(`#token`), tokens[u]),
			chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#get`)),
			pollVoid(`document.querySelectorAll('#task option').length === 3`, chromedp.WithPollingTimeout(20*time.Second)),
		); err != nil {
			t.Fatalf("%s signing in on node %d: %v", u, i/2, err)
		}
		if who := eval[string](t, ctx, `document.getElementById('user').textContent`); who != u {
			t.Fatalf("signed in as %q, want %q", who, u)
		}
		if i == 0 && os.Getenv("LOANQ_WORK_SCREENSHOT") != "" {
			// The sign-in form, for the docs: a fresh context that has no session.
			lctx, lcancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
			if err := chromedp.Do(lctx, chromedp.Navigate(node+"/work"), chromedp.WaitVisible(chromedp.CSS(`#token`))); err != nil {
				t.Fatal(err)
			}
			screenshot(t, lctx, filepath.Join(os.Getenv("LOANQ_WORK_SCREENSHOT"), "work-login.png"))
			lcancel()
		}
		eval[bool](t, ctx, `(function(){ document.getElementById('task').value = 'verify-bank'; document.getElementById('count').value = '2'; window.__marker = 42; return true })()`)
	}

	// Get Work, at once, in the four browsers; each watches for "looking…".
	var wg sync.WaitGroup
	start := make(chan struct{})
	sawLooking := make([]bool, len(users))
	errs := make([]error, len(users))
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx := tabs[i]
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#get`))); err != nil {
				errs[i] = err
				return
			}
			looking, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('status').textContent.startsWith('looking')`,
				chromedp.WithPollingTimeout(2*time.Second), chromedp.WithPollingInterval(20*time.Millisecond)))
			sawLooking[i] = err == nil && looking
			errs[i] = chromedp.Do(ctx, pollVoid(`document.querySelectorAll('#pipeline tbody tr').length === 2 &&
				!document.getElementById('status').textContent.startsWith('looking')`, chromedp.WithPollingTimeout(60*time.Second)))
		}()
	}
	close(start)
	if shots := os.Getenv("LOANQ_WORK_SCREENSHOT"); shots != "" {
		// ana's page while the criteria query runs.
		time.Sleep(300 * time.Millisecond)
		screenshot(t, tabs[0], filepath.Join(shots, "work-looking.png"))
	}
	wg.Wait()
	seen := map[string]string{}
	for i, u := range users {
		if errs[i] != nil {
			t.Fatalf("%s: the pipeline did not show 2 loans without a reload: %v (status %q)", u, errs[i],
				eval[string](t, tabs[i], `document.getElementById('status').textContent`))
		}
		if !sawLooking[i] {
			t.Errorf("%s: the page did not show \"looking…\" while the request was pending", u)
		}
		if m := eval[int](t, tabs[i], `window.__marker || 0`); m != 42 {
			t.Errorf("%s: the page reloaded (marker lost) instead of replacing \"looking…\"", u)
		}
		for _, l := range eval[[]string](t, tabs[i], `Array.from(document.querySelectorAll('#pipeline tbody tr')).map(r => r.dataset.loan)`) {
			if other, dup := seen[l]; dup {
				t.Errorf("loan %s shown to %s and %s", l, other, u)
			}
			seen[l] = u
			if got := testdb.Int(t, d, db, `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
				WHERE k.name = 'verify-bank' AND w.loan_id = ? AND w.user_name = ? AND w.disposition IS NULL`, l, u); got != 1 {
				t.Errorf("the database does not hold loan %s as %s's active work", l, u)
			}
		}
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(DISTINCT loan_id) FROM loanq_work WHERE disposition IS NULL"); n != 8 || len(seen) != 8 {
		t.Errorf("%d distinct active loans in the database, %d on the pages; want 8", n, len(seen))
	}

	// Loan keys holding markup are shown as text: dee gets both; no element
	// is injected, no script ran, the cells and the status line hold the
	// keys as they are.
	dee := tabs[3]
	if err := chromedp.Do(dee,
		void(chromedp.Evaluate[bool](`(() => { document.getElementById('task').value = 'markup'; document.getElementById('count').value = '2'; return true })()`)),
		chromedp.Click(chromedp.CSS(`#get`)),
		pollVoid(`document.querySelectorAll('#pipeline tbody tr').length === 4 && document.getElementById('status').className === 'ok'`,
			chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("dee getting the markup-keyed loans: %v (status %q)", err, eval[string](t, dee, `document.getElementById('status').textContent`))
	}
	if injected := eval[string](t, dee, `(() => [document.querySelectorAll('img').length, document.scripts.length,
		document.querySelectorAll('#pipeline tbody td script, #pipeline tbody td img').length, typeof window.__xss].join(' '))()`); injected != "0 1 0 undefined" {
		t.Errorf("markup in loan keys made elements or ran a script (img, script, in cells, __xss): %s", injected)
	}
	cells := eval[[]string](t, dee, `Array.from(document.querySelectorAll('#pipeline tbody tr[data-task="markup"] td:nth-child(2)')).map(td => td.textContent).sort()`)
	want := append([]string(nil), markupKeys...)
	slices.Sort(want)
	if !slices.Equal(cells, want) {
		t.Errorf("the pipeline shows the markup keys as %q, want the text %q", cells, want)
	}
	if st := eval[string](t, dee, `document.getElementById('status').textContent`); !strings.Contains(st, markupKeys[0]) || !strings.Contains(st, markupKeys[1]) {
		t.Errorf("the status line %q does not show the keys as text", st)
	}

	// Complete: the loan leaves the pipeline and enters the day's history.
	ana := tabs[0]
	first := eval[string](t, ana, `document.querySelector('#pipeline tbody tr').dataset.loan`)
	if err := chromedp.Do(ana,
		chromedp.Click(chromedp.CSS(`#pipeline tbody tr:first-child button.complete`)),
		pollVoid(fmt.Sprintf(`document.querySelectorAll('#pipeline tbody tr').length === 1 &&
			!document.querySelector('#pipeline tbody tr[data-loan="%s"]') && document.querySelectorAll('#history tbody tr').length === 1`, first),
			chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("Complete did not remove loan %s from the pipeline: %v", first, err)
	}
	if got := eval[string](t, ana, `document.querySelector('#history tbody tr td:nth-child(4)').textContent`); got != "complete" {
		t.Errorf("history shows %q, want complete", got)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'ana' AND disposition = 'complete' AND loan_id = ?", first); n != 1 {
		t.Errorf("loan %s is not complete in the database", first)
	}
	// Keyboard: Return after… is reachable and works with the keyboard alone.
	if err := chromedp.Do(ana,
		chromedp.Focus(chromedp.CSS(`#pipeline tbody tr:first-child button.return`)),
		chromedp.KeyEvent("\r"),
		pollVoid(`document.querySelectorAll('#pipeline tbody tr').length === 0 && document.querySelectorAll('#history tbody tr').length === 2`,
			chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("Return after… by the keyboard: %v", err)
	}
	if shots := os.Getenv("LOANQ_WORK_SCREENSHOT"); shots != "" {
		// bob's page: a pipeline, and a day with some history.
		bob := tabs[1]
		if err := chromedp.Do(bob,
			chromedp.Click(chromedp.CSS(`#pipeline tbody tr:first-child button.never`)),
			pollVoid(`document.querySelectorAll('#pipeline tbody tr').length === 1`, chromedp.WithPollingTimeout(20*time.Second)),
			void(chromedp.Evaluate[bool](`(() => { document.getElementById('task').value = 'call-borrower'; document.getElementById('count').value = '3'; return true })()`)),
			chromedp.Click(chromedp.CSS(`#get`)),
			pollVoid(`document.querySelectorAll('#pipeline tbody tr').length === 4 && document.getElementById('status').className === 'ok'`,
				chromedp.WithPollingTimeout(20*time.Second)),
		); err != nil {
			t.Fatal(err)
		}
		screenshot(t, bob, filepath.Join(shots, "work-page.png"))
	}

	// The page's endpoints refuse another user's request and loan, and a
	// POST without the CSRF token, from inside ana's signed-in page.
	var bobReq int64
	if err := db.QueryRow(testdb.Rebind(d, "SELECT MIN(id) FROM loanq_work_request WHERE user_name = 'bob'")).Scan(&bobReq); err != nil {
		t.Fatal(err)
	}
	bobLoan := testdb.Int(t, d, db, "SELECT MIN(loan_id) FROM loanq_work WHERE user_name = 'bob' AND disposition IS NULL")
	csrf := `document.querySelector('meta[name="loanq-csrf"]').content`
	for name, js := range map[string]string{
		"bob's request":        fmt.Sprintf(`fetch('/api/v1/requests/%d').then(r => r.status)`, bobReq),
		"cancel bob's request": fmt.Sprintf(`fetch('/api/v1/requests/%d', {method: 'DELETE', headers: {'X-CSRF-Token': %s}}).then(r => r.status)`, bobReq, csrf),
		"bob's loan": fmt.Sprintf(`fetch('/api/v1/tasks/verify-bank/loans/%d/disposition', {method: 'POST',
			headers: {'X-CSRF-Token': %s, 'Content-Type': 'application/json'}, body: '{"action": "complete"}'}).then(r => r.status)`, bobLoan, csrf),
		"a POST without the CSRF token": `fetch('/api/v1/tasks/verify-bank/requests', {method: 'POST',
			headers: {'Content-Type': 'application/json'}, body: '{"count": 1}'}).then(r => r.status)`,
	} {
		status, err := chromedp.Run(ana, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
		if err != nil || status != 403 {
			t.Errorf("%s from ana's page: %d %v, want 403", name, status, err)
		}
	}
	// A cross-site POST: a page of node 1 (another origin) posting to node 0
	// with ana's cookies, as a hostile page would; the browser sends its
	// Origin, serve refuses it, nothing is logged.
	before := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'ana'")
	if err := chromedp.Do(ana, chromedp.Navigate(nodes[1].url+"/work"),
		void(chromedp.Evaluate[bool](fmt.Sprintf(`fetch(%q, {method: 'POST', mode: 'no-cors', credentials: 'include',
			headers: {'Content-Type': 'text/plain'}, body: '{"count": 1, "wait_ms": 0}'}).then(() => true, () => true)`,
			nodes[0].url+"/api/v1/tasks/call-borrower/requests"), chromedp.EvalAwaitPromise)),
	); err != nil {
		t.Fatal(err)
	}
	if after := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'ana'"); after != before {
		t.Errorf("a cross-origin POST logged a request for ana (%d → %d)", before, after)
	}

	// An expired session: the next action brings the sign-in form back.
	testdb.Exec(t, d, db, "UPDATE loanq_session SET expires_at = created_at WHERE user_name = 'cy'")
	cy := tabs[2]
	if err := chromedp.Do(cy, chromedp.Click(chromedp.CSS(`#get`)),
		chromedp.WaitVisible(chromedp.CSS(`#token`))); err != nil {
		t.Fatalf("an expired session did not bring back the sign-in form: %v", err)
	}
	if loc := eval[string](t, cy, `location.pathname`); !strings.HasSuffix(loc, "/work") {
		t.Errorf("sign-in form at %s", loc)
	}
}

// pollVoid is chromedp.Poll for a condition, as a step of chromedp.Do.
func pollVoid(js string, opts ...chromedp.PollOption) chromedp.Action[chromedp.Void] {
	return void(chromedp.Poll[bool](js, opts...))
}

// void drops an action's value, to run it among chromedp.Do's steps.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}
