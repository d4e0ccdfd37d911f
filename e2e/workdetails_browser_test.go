package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// TestWorkPageDetailsInBrowser drives Debian's chromium, headless, through
// what the processor's page shows of each loan and the next-work button, on
// SQLite, PostgreSQL and MariaDB: three tasks (priorities 10, 5, 0; two show
// columns and one a link), "Get next work" for 4 loans fills the pipeline
// from the highest-priority task first and says each loan's task; each loan
// of a task that shows something is a card with its columns (a borrower
// holding markup shown as text: nothing injected, no script run) and its
// link, opening in a new tab with rel=noopener and its values URL-escaped;
// the duration select comes before its Return after… button; a return of 1
// day shows its date in the day's history; /favicon.ico is an icon; Tab
// reaches every control in reading order, each a real button, select,
// input or link, with a visible focus ring. LOANQ_WORK_SCREENSHOT=DIR saves
// docs/img/work-details.png and docs/img/work-return-date.png into DIR.
func TestWorkPageDetailsInBrowser(t *testing.T) {
	// No t.Parallel: it drives chromium, heavy on this machine's two cores.
	browser := chromium(t)
	for _, dialect := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) { workPageDetails(t, browser, dialect) })
	}
}

const markupBorrower = `<img src=x onerror="window.__xss=1">Bo & Co`

func workPageDetails(t *testing.T, browser, dialect string) {
	dsn := testdb.Fresh(t, dialect)
	d, db := testdb.Migrated(t, dsn)
	tb := d.Tables()
	testdb.Exec(t, d, db, fmt.Sprintf("CREATE TABLE borrower_loan (id %s PRIMARY KEY, kind %s, borrower %s, amount DECIMAL(12,2))",
		tb.BigInt, strings.ReplaceAll(tb.Text, "%d", "20"), strings.ReplaceAll(tb.Text, "%d", "100")))
	borrowers := map[int]any{1: "Ann Lee", 2: markupBorrower, 3: "Cé / Dü?", 4: nil, 5: "Eve Adams", 6: "Fay Wu", 7: "Gus Ortiz", 8: "Hana Sato", 9: "Ivo Novak"}
	for i := 1; i <= 9; i++ {
		kind := []string{"big", "bank", "call"}[(i-1)/3]
		testdb.Exec(t, d, db, "INSERT INTO borrower_loan (id, kind, borrower, amount) VALUES (?, ?, ?, ?)", i, kind, borrowers[i], fmt.Sprintf("%d.50", 125000*i))
	}
	mustOK(t, dsn, "admin", "task", "create", "big-loans", "--source", "borrower_loan", "--where", "kind = 'big'", "--order", "id",
		"--priority", "10", "--show", "borrower,amount", "--link", "https://los.example/loans/{key}?b={borrower}")
	mustOK(t, dsn, "admin", "task", "create", "verify-bank", "--source", "borrower_loan", "--where", "kind = 'bank'", "--order", "id",
		"--priority", "5", "--show", "borrower", "--link", "https://los.example/verify/{key}")
	mustOK(t, dsn, "admin", "task", "create", "call-borrower", "--source", "borrower_loan", "--where", "kind = 'call'", "--order", "id")
	e := newEngine(db, d)
	tok, err := e.Admin().CreateToken(context.Background(), "ana", "processor", "admin", 0)
	if err != nil {
		t.Fatal(err)
	}
	node := startServe(t, dsn, "--api")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(node.url+"/work"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), tok.Token),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#next`)),
		pollVoid(`document.querySelectorAll('#task option').length === 3`, chromedp.WithPollingTimeout(20*time.Second)),
		void(chromedp.Evaluate[bool](`(() => { document.getElementById('count').value = '4'; return true })()`)),
		chromedp.Click(chromedp.CSS(`#next`)),
		pollVoid(`document.querySelectorAll('#pipeline tbody tr').length === 4 && document.getElementById('status').className === 'ok'`,
			chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("Get next work: %v (status %q)", err, eval[string](t, ctx, `document.getElementById('status').textContent`))
	}
	status := eval[string](t, ctx, `document.getElementById('status').textContent`)
	if want := "Next work: loan 1 (big-loans), loan 2 (big-loans), loan 3 (big-loans), loan 4 (verify-bank)."; status != want {
		t.Errorf("status after Get next work: %q, want %q", status, want)
	}
	if n := testdb.Int(t, d, db, `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
		WHERE w.user_name = 'ana' AND w.disposition IS NULL AND ((k.name = 'big-loans' AND w.loan_id IN ('1', '2', '3')) OR (k.name = 'verify-bank' AND w.loan_id = '4'))`); n != 4 {
		t.Errorf("the database holds %d of the 4 loans the page shows as ana's", n)
	}
	// The cards: columns, values as text, the link.
	type card struct {
		Task, Key, Link, Target, Rel string
		Cols                         []string
	}
	cards := eval[[]card](t, ctx, `Array.from(document.querySelectorAll('#pipeline tbody tr')).map(tr => {
		const a = tr.querySelector('.loan-card a');
		return {Task: tr.dataset.task, Key: tr.querySelector('.loan-key').textContent,
			Link: a ? a.getAttribute('href') : '', Target: a ? a.target : '', Rel: a ? a.rel : '',
			Cols: Array.from(tr.querySelectorAll('.loan-card dt, .loan-card dd')).map(x => x.textContent)};
	})`)
	want := map[string]card{
		"1": {Task: "big-loans", Link: "https://los.example/loans/1?b=Ann%20Lee", Cols: []string{"borrower", "Ann Lee", "amount", "125000.5"}},
		"2": {Task: "big-loans", Link: "https://los.example/loans/2?b=%3Cimg%20src%3Dx%20onerror%3D%22window.__xss%3D1%22%3EBo%20%26%20Co",
			Cols: []string{"borrower", markupBorrower, "amount", "250000.5"}},
		"3": {Task: "big-loans", Link: "https://los.example/loans/3?b=C%C3%A9%20%2F%20D%C3%BC%3F", Cols: []string{"borrower", "Cé / Dü?", "amount", "375000.5"}},
		"4": {Task: "verify-bank", Link: "https://los.example/verify/4", Cols: []string{"borrower", "—"}},
	}
	for _, c := range cards {
		w, ok := want[c.Key]
		if !ok {
			t.Errorf("unexpected card %+v", c)
			continue
		}
		if len(c.Cols) == 4 {
			// An amount as the database writes a DECIMAL: 125000.50, or
			// 125000.5 on SQLite (NUMERIC affinity).
			c.Cols[3] = strings.TrimSuffix(c.Cols[3], "0")
		}
		if c.Task != w.Task || c.Link != w.Link || strings.Join(c.Cols, "|") != strings.Join(w.Cols, "|") {
			t.Errorf("loan %s card: %+v, want %+v", c.Key, c, w)
		}
		if c.Target != "_blank" || !strings.Contains(c.Rel, "noopener") {
			t.Errorf("loan %s link: target %q rel %q, want a new tab with noopener", c.Key, c.Target, c.Rel)
		}
	}
	if injected := eval[string](t, ctx, `[document.querySelectorAll('img').length, typeof window.__xss].join(' ')`); injected != "0 undefined" {
		t.Errorf("a borrower holding markup made elements or ran a script (img, __xss): %s", injected)
	}
	if order := eval[string](t, ctx, `Array.from(document.querySelectorAll('#pipeline tbody tr:first-child .actions button, #pipeline tbody tr:first-child .actions select')).map(e => e.className).join(' ')`); order != "complete after return never reason" {
		t.Errorf("a loan's controls in order: %s; want the duration before its Return after… button", order)
	}
	fav, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/favicon.ico').then(r => r.status + ' ' + r.headers.get('Content-Type'))`, chromedp.EvalAwaitPromise))
	if err != nil || fav != "200 image/x-icon" {
		t.Errorf("/favicon.ico: %q %v, want 200 image/x-icon", fav, err)
	}
	shots := os.Getenv("LOANQ_WORK_SCREENSHOT")
	if shots != "" && dialect == "postgres" {
		screenshot(t, ctx, filepath.Join(shots, "work-details.png"))
	}

	// Keyboard: from the task list, Tab walks every control in reading
	// order, each a real control, with a visible focus ring.
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(`#task`))); err != nil {
		t.Fatal(err)
	}
	var walk []string
	for range 10 {
		if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		el := eval[string](t, ctx, `(() => { const a = document.activeElement; const s = getComputedStyle(a);
			return a.tagName.toLowerCase() + (a.id ? '#' + a.id : '') + (a.className ? '.' + a.className : '') + (s.outlineStyle === 'none' ? ' NO-FOCUS-RING' : ''); })()`)
		walk = append(walk, el)
	}
	if got, wantWalk := strings.Join(walk, " "), "input#count button#get button#next a button.complete select.after button.return button.never input.note a"; got != wantWalk {
		t.Errorf("Tab from the task list: %s\nwant %s", got, wantWalk)
	}

	// Return after 1 day by the keyboard: the day's history shows the date
	// the loan comes back, not only a time.
	if err := chromedp.Do(ctx,
		void(chromedp.Evaluate[bool](`(() => { document.querySelector('#pipeline tbody tr[data-loan="1"] select.after').value = '24h'; return true })()`)),
		chromedp.Focus(chromedp.CSS(`#pipeline tbody tr[data-loan="1"] button.return`)),
		chromedp.KeyEvent("\r"),
		pollVoid(`document.querySelectorAll('#history tbody tr').length === 1 && document.querySelectorAll('#pipeline tbody tr').length === 3`,
			chromedp.WithPollingTimeout(20*time.Second)),
	); err != nil {
		t.Fatalf("Return after 1 day by the keyboard: %v", err)
	}
	back := eval[string](t, ctx, `document.querySelector('#history tbody tr td:nth-child(4)').textContent`)
	date := eval[string](t, ctx, `new Date(Date.now() + 86400000).toLocaleDateString([], {day: 'numeric', month: 'short'})`)
	if !strings.HasPrefix(back, "return (back at "+date+" ") {
		t.Errorf("history of a return after 1 day: %q, want the date %q in it", back, date)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'ana' AND disposition = 'return' AND loan_id = '1'"); n != 1 {
		t.Errorf("loan 1 is not returned in the database")
	}
	if shots != "" && dialect == "postgres" {
		screenshot(t, ctx, filepath.Join(shots, "work-return-date.png"))
	}
}
