package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// What a task shows with each loan (docs/commands.md, "Loan details and a
// link"): columns of its source (--show) and a link into the lending system
// (--link, a URL template). They are read with the hand-out, one statement
// per task for every loan of the answer (LoanDetails), never one per loan.

// Limits of --show and --link, the same on every dialect (migration 00020:
// show_columns VARCHAR(1000), link_template VARCHAR(2000)).
const (
	MaxShowColumns = 20
	maxShowChars   = 1000
	maxLinkChars   = 2000
	// MaxPriority bounds --priority both ways (an INT column everywhere).
	MaxPriority = 1_000_000
)

// Detail is one shown column of a loan: its value as text, nil for NULL.
type Detail struct {
	Column string
	Value  *string
}

// Details are a loan's shown columns in the order of the task's --show. As
// JSON an object, column → value (a string, or null), in that order.
type Details []Detail

// MarshalJSON writes the details as one object, keeping their order.
func (d Details) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, x := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(x.Column)
		v, _ := json.Marshal(x.Value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// LoanItem is a loan handed out or held, with what its task shows of it:
// the items of `work get`'s and `work status`'s "work" list and of `work
// next`'s (docs/json.md). Link is nil when the task has no --link.
type LoanItem struct {
	Task      string      `json:"task"`
	RequestID int64       `json:"request_id,omitempty"`
	LoanID    loankey.Key `json:"loan_id"`
	Details   Details     `json:"details"`
	Link      *string     `json:"link"`
}

// ParseShow reads --show: column names separated by commas ("" shows
// nothing). Each is a plain column name of the source; none twice.
func ParseShow(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cols []string
	seen := map[string]bool{}
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if err := checkKey(c); err != nil || c == "" {
			return nil, problem.Usagef("invalid --show column %q: give column names of the task's --source separated by commas (e.g. --show borrower,amount)", c)
		}
		if seen[strings.ToLower(c)] {
			return nil, problem.Usagef("invalid --show: column %s is given twice", c)
		}
		seen[strings.ToLower(c)] = true
		cols = append(cols, c)
	}
	if len(cols) > MaxShowColumns {
		return nil, problem.Usagef("invalid --show: %d columns, at most %d are shown", len(cols), MaxShowColumns)
	}
	if n := len(strings.Join(cols, ",")); n > maxShowChars {
		return nil, problem.Usagef("invalid --show: %d characters, at most %d are stored", n, maxShowChars)
	}
	return cols, nil
}

// checkPriority checks --priority.
func checkPriority(n int) error {
	if n < -MaxPriority || n > MaxPriority {
		return problem.Usagef("invalid --priority %d: give an integer between %d and %d (higher first; default 0)", n, -MaxPriority, MaxPriority)
	}
	return nil
}

// placeholders returns the names between braces in a link template, in
// order, or an error for a brace that does not close one.
func placeholders(tmpl string) ([]string, error) {
	var names []string
	for rest := tmpl; ; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			return names, nil
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("a '}' without its '{'")
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] != '}' {
			return nil, fmt.Errorf("a '{' without its '}'")
		}
		names = append(names, rest[open+1:open+1+end])
		rest = rest[open+1+end+1:]
	}
}

// CheckLink checks a --link template against the task's --show columns: an
// http or https URL whose scheme and host are written out (no placeholder
// there: a value of the source may not send the processor elsewhere), and
// whose placeholders are {key} or {COLUMN} of a shown column.
func CheckLink(tmpl string, show []string) error {
	if tmpl == "" {
		return nil
	}
	const how = "give an http or https URL such as 'https://los.example/loans/{key}', with {key} and {COLUMN} of --show columns"
	if len(tmpl) > maxLinkChars {
		return problem.Usagef("invalid --link: %d characters, at most %d are stored", len(tmpl), maxLinkChars)
	}
	if strings.ContainsAny(tmpl, " \t\r\n\"<>\\^`|") {
		return problem.Usagef("invalid --link %s: a URL has no spaces, quotes or <>\\^`| (percent-encode them); %s", quote(tmpl), how)
	}
	lower := strings.ToLower(tmpl)
	var rest string
	switch {
	case strings.HasPrefix(lower, "https://"):
		rest = tmpl[len("https://"):]
	case strings.HasPrefix(lower, "http://"):
		rest = tmpl[len("http://"):]
	default:
		return problem.Usagef("invalid --link %s: it must start with http:// or https://; %s", quote(tmpl), how)
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		host = rest[:i]
	}
	if host == "" || strings.ContainsAny(host, "{}@") {
		return problem.Usagef("invalid --link %s: write its host out (no placeholder and no user@ before the first '/'); %s", quote(tmpl), how)
	}
	names, err := placeholders(tmpl)
	if err != nil {
		return problem.Usagef("invalid --link %s: %v; %s", quote(tmpl), err, how)
	}
	for _, n := range names {
		if n == "key" || showIndex(show, n) >= 0 {
			continue
		}
		known := "{key}"
		for _, c := range show {
			known += ", {" + c + "}"
		}
		return problem.Usagef("invalid --link %s: unknown placeholder {%s}: use %s (a column must be in --show)", quote(tmpl), n, known)
	}
	return nil
}

// showIndex is the position of column name in show (case does not
// matter: databases fold unquoted names), or -1.
func showIndex(show []string, name string) int {
	for i, c := range show {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// escapeURLPart percent-encodes everything but RFC 3986's unreserved
// characters, so that a value is one opaque piece wherever the template puts
// it: a path segment ('/' encoded), a query value ('&', '=', '+', '#'
// encoded).
func escapeURLPart(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// renderLink fills a checked template with a loan's key and shown values
// (NULL: empty), each URL-escaped.
func renderLink(tmpl, key string, show []string, d Details) *string {
	if tmpl == "" {
		return nil
	}
	var b strings.Builder
	rest := tmpl
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 { // not a checked template: leave the rest out
			break
		}
		b.WriteString(rest[:open])
		name := rest[open+1 : open+end]
		switch i := showIndex(show, name); {
		case name == "key":
			b.WriteString(escapeURLPart(key))
		case i >= 0 && i < len(d) && d[i].Value != nil:
			b.WriteString(escapeURLPart(*d[i].Value))
		}
		rest = rest[open+end+1:]
	}
	s := b.String()
	return &s
}

// withWork fills req.Work: its loans with what their task shows, read in
// one statement for all of them (loanItems). A failed read is said in
// req.Notice, not returned: the loans are the caller's already.
func (e *Engine) withWork(ctx context.Context, t *Task, req *Request) *Request {
	if req == nil {
		return nil
	}
	if len(req.Loans) == 0 {
		req.Work = []LoanItem{}
		return req
	}
	if t == nil || t.ID != req.TaskID {
		var err error
		if t, err = e.taskByID(ctx, req.TaskID); err != nil {
			req.Notice = joinNotice(req.Notice, "the loans' details could not be read: "+err.Error())
			return req
		}
	}
	items, err := e.loanItems(ctx, t, req.ID, req.Loans)
	req.Work = items
	if err != nil {
		req.Notice = joinNotice(req.Notice, "the loans' details could not be read: "+err.Error())
	}
	return req
}

// pipelineDetails fills the details and links of a pipeline: one read of
// each task's definition and one details statement per task (loanItems).
func (e *Engine) pipelineDetails(ctx context.Context, items []PipelineItem) error {
	byTask := map[string][]int{}
	var order []string
	for i, it := range items {
		if _, ok := byTask[it.Task]; !ok {
			order = append(order, it.Task)
		}
		byTask[it.Task] = append(byTask[it.Task], i)
	}
	for _, name := range order {
		t, err := e.taskByName(ctx, name)
		if err != nil {
			return err
		}
		if len(t.Show) == 0 && t.Link == "" {
			continue
		}
		keys := make([]loankey.Key, len(byTask[name]))
		for j, i := range byTask[name] {
			keys[j] = items[i].LoanID
		}
		loans, err := e.loanItems(ctx, t, 0, keys)
		if err != nil {
			return err
		}
		for j, i := range byTask[name] {
			items[i].Details, items[i].Link = loans[j].Details, loans[j].Link
		}
	}
	return nil
}

func joinNotice(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// checkDetails runs the shown columns against the task's source (a probe
// that returns no row): a column that is not there is bad input, with the
// database's message. Outside any transaction, as keyKind's probe.
func (a *Admin) checkDetails(ctx context.Context, t *Task) error {
	if len(t.Show) == 0 {
		return nil
	}
	rows, err := drivers.SourceProbe(a.driver.Dialect(), t.criteria(), t.Show...).Query(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return &problem.Error{Kind: problem.Usage, Err: err,
			Msg:  fmt.Sprintf("the --show columns %s of task %q are not all columns of %s", strings.Join(t.Show, ","), t.Name, t.Source),
			Hint: "give --show columns of the task's --source (a view can rename or compute them)"}
	}
	return rows.Close()
}

// loanItems returns the keys of one task as LoanItems with the task's
// details and link: the details read in one statement per run of keys
// under the bind limit (keyChunks), none when the task shows no column.
// A failed read leaves the details empty and says why in the error: the
// loans are handed out already, and the caller still gets them.
func (e *Engine) loanItems(ctx context.Context, t *Task, requestID int64, keys []loankey.Key) ([]LoanItem, error) {
	out := make([]LoanItem, len(keys))
	for i, k := range keys {
		out[i] = LoanItem{Task: t.Name, RequestID: requestID, LoanID: k, Details: Details{}}
	}
	var failed error
	texts := loankey.Texts(keys)
	if len(t.Show) > 0 && len(keys) > 0 {
		found, err := e.readDetails(ctx, t, texts)
		if err != nil {
			failed = fmt.Errorf("reading the --show columns of task %s: %w", t.Name, err)
		}
		for i := range out {
			if d, ok := found[texts[i]]; ok {
				out[i].Details = d
			} else {
				out[i].Details = emptyDetails(t.Show)
			}
		}
	}
	for i := range out {
		out[i].Link = renderLink(t.Link, texts[i], t.Show, out[i].Details)
	}
	return out, failed
}

// emptyDetails: every shown column null (a loan no longer in the source).
func emptyDetails(show []string) Details {
	d := make(Details, len(show))
	for i, c := range show {
		d[i] = Detail{Column: c}
	}
	return d
}

// readDetails reads the shown columns of the keys (loanq's text form) by
// key. Values are read as text: a number as its digits, a timestamp as
// RFC 3339, the same document on every database.
func (e *Engine) readDetails(ctx context.Context, t *Task, keys []string) (map[string]Details, error) {
	// Keys of the source's columns as the tasks' definition wrote them:
	// re-checked, as the criteria are, before they are spliced into SQL
	// (anyone who may write loanq_task could have stored anything).
	if _, err := ParseShow(strings.Join(t.Show, ",")); err != nil {
		return nil, err
	}
	stmt := drivers.LoanDetails(e.driver.Dialect(), t.criteria(), t.Show)
	found := map[string]Details{}
	for _, run := range keyChunks(t.KeyKind, keys) {
		if err := e.detailsRun(ctx, stmt, t, run, found); err != nil {
			return found, err
		}
	}
	return found, nil
}

func (e *Engine) detailsRun(ctx context.Context, stmt *drivers.Stmt[engineio.RecheckParams], t *Task, run []string, found map[string]Details) error {
	rows, err := stmt.Query(ctx, e.db, engineio.RecheckParams{IDs: loankey.JSON(t.KeyKind, run)})
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]any, 1+len(t.Show))
	var key string
	cells := make([]nullText, len(t.Show))
	vals[0] = &key
	for i := range cells {
		vals[i+1] = &cells[i]
	}
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			return err
		}
		d := make(Details, len(t.Show))
		for i, c := range t.Show {
			d[i] = Detail{Column: c}
			if cells[i].valid {
				v := cells[i].s
				d[i].Value = &v
			}
		}
		found[key] = d
	}
	return rows.Err()
}

// nullText scans any column as text: bytes and strings as they are, a
// timestamp as RFC 3339 (UTC), anything else as fmt prints it.
type nullText struct {
	s     string
	valid bool
}

func (n *nullText) Scan(v any) error {
	n.valid = v != nil
	switch x := v.(type) {
	case nil:
		n.s = ""
	case []byte:
		n.s = string(x)
	case string:
		n.s = x
	case time.Time:
		n.s = x.UTC().Format(time.RFC3339Nano)
	default:
		n.s = fmt.Sprint(x)
	}
	return nil
}
