package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

// Reasons and notes (docs/reasons.md): a task may declare reason codes per
// action (complete, return, never) and require one for some actions; a
// disposition carries a reason code and a free-text note. The database
// checks the codes (migration 00019's trigger); the engine only explains a
// refusal.

// MaxNote is the longest note a disposition keeps, in characters.
const MaxNote = 1000

// maxReasonsText is the room of loanq_task.reasons.
const maxReasonsText = 1000

// reasonActions are the actions that take reason codes, in the order the
// codes are written and shown.
var reasonActions = []string{Complete, Return, Never}

var reasonCodeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`) })

// Reasons is a task's declared codes per action and the actions that
// require a reason. The zero value declares nothing.
type Reasons struct {
	Codes    map[string][]string // action → codes, in the order given
	Required []string            // actions, in reasonActions order
}

// Empty says the task declares no codes and requires nothing.
func (r Reasons) Empty() bool { return len(r.Codes) == 0 && len(r.Required) == 0 }

// CodesText is the codes as stored and as --reasons takes them:
// 'never=duplicate,fraud;return=waiting-docs' ("" for none).
func (r Reasons) CodesText() string {
	var parts []string
	for _, a := range reasonActions {
		if c := r.Codes[a]; len(c) > 0 {
			parts = append(parts, a+"="+strings.Join(c, ","))
		}
	}
	return strings.Join(parts, ";")
}

// RequiredText is the required actions as stored: 'never,return'.
func (r Reasons) RequiredText() string { return strings.Join(r.Required, ",") }

// Requires says whether the task requires a reason for action.
func (r Reasons) Requires(action string) bool { return slices.Contains(r.Required, action) }

// ParseReasonCodes reads --reasons: "ACTION=CODE,CODE;ACTION=CODE" ("off":
// none).
func ParseReasonCodes(spec string) (map[string][]string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "off" || spec == "" {
		return nil, nil
	}
	example := "e.g. --reasons 'never=duplicate,fraud,withdrawn;return=waiting-docs', or --reasons off for none"
	out := map[string][]string{}
	for _, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		action, list, ok := strings.Cut(part, "=")
		action = strings.ToLower(strings.TrimSpace(action))
		if !ok || !slices.Contains(reasonActions, action) {
			return nil, problem.Usagef("invalid --reasons %s: %s is not ACTION=CODE,... with ACTION complete, return or never (%s)", quote(spec), quote(part), example)
		}
		if _, dup := out[action]; dup {
			return nil, problem.Usagef("invalid --reasons %s: %s is given twice; list all its codes once (%s)", quote(spec), action, example)
		}
		var codes []string
		for _, c := range strings.Split(list, ",") {
			c = strings.TrimSpace(c)
			if !reasonCodeRE().MatchString(c) {
				return nil, problem.Usagef("invalid reason code %s for %s: use 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit (%s)", quote(c), action, example)
			}
			if slices.Contains(codes, c) {
				return nil, problem.Usagef("invalid --reasons: code %s is listed twice for %s", c, action)
			}
			codes = append(codes, c)
		}
		out[action] = codes
	}
	if len((Reasons{Codes: out}).CodesText()) > maxReasonsText {
		return nil, problem.Usagef("invalid --reasons: the codes take more than %d characters; declare fewer or shorter codes", maxReasonsText)
	}
	return out, nil
}

// ParseRequireReason reads --require-reason: "ACTION[,ACTION]" ("off":
// none).
func ParseRequireReason(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "off" || list == "" {
		return nil, nil
	}
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.ToLower(strings.TrimSpace(a))
		if !slices.Contains(reasonActions, a) {
			return nil, problem.Usagef("invalid --require-reason %s: give actions among complete, return and never, separated by commas (e.g. never,return), or off", quote(list))
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(reasonActions, a) - slices.Index(reasonActions, b) })
	return out, nil
}

// check: every action that requires a reason has codes to choose from.
func (r Reasons) check() error {
	for _, a := range r.Required {
		if len(r.Codes[a]) == 0 {
			return problem.Usagef("--require-reason %s needs codes for %s: declare them with --reasons '%s=CODE,CODE' (a reason is chosen from the task's codes)", r.RequiredText(), a, a)
		}
	}
	return nil
}

// CheckReasonAndNote checks a disposition's reason code and note without a
// database (the code's form, the note's length and characters).
func CheckReasonAndNote(reason, note string) error {
	if reason != "" && !reasonCodeRE().MatchString(reason) {
		return problem.Usagef("invalid --reason %s: a reason is one of the task's codes (loanq task show TASK lists them): 1-40 lowercase letters, digits, '-' or '_'", quote(reason))
	}
	if n := utf8.RuneCountInString(note); n > MaxNote {
		return problem.Usagef("--note is %d characters long: at most %d", n, MaxNote)
	}
	if !utf8.ValidString(note) {
		return problem.Usagef("invalid --note: it is not UTF-8 text")
	}
	if pos, r, ok := textsafe.FirstUnsafe(note, true); ok {
		return problem.Usagef("invalid --note: character %d is %s, a control or invisible character; write plain text (line breaks and tabs are fine)", pos, textsafe.CharName(r))
	}
	return nil
}

// CheckReason checks a disposition's reason against the task's codes: the
// message the database's refusal is explained with, and what the commands
// say before anything is sent.
func (r Reasons) CheckReason(task, action, reason string) error {
	codes := r.Codes[action]
	if reason == "" {
		if r.Requires(action) {
			return problem.Usagef("task %s requires a reason for %s: add --reason with one of %s", task, action, strings.Join(codes, ", "))
		}
		return nil
	}
	if len(codes) > 0 && !slices.Contains(codes, reason) {
		return problem.Usagef("reason %s is not one of task %s's codes for %s: use one of %s", quote(reason), task, action, strings.Join(codes, ", "))
	}
	return nil
}

// TaskReasons reads a task's declared codes.
func (a *Admin) TaskReasons(ctx context.Context, t *Task) (Reasons, error) {
	return a.taskReasons(ctx, a.db, t.ID, t.Name)
}

func (st *store) taskReasons(ctx context.Context, q drivers.Querier, id int64, name string) (Reasons, error) {
	row, err := st.reasonSQL().TaskReasons.One(ctx, q, engineio.TaskParams{TaskID: id})
	if err != nil {
		if err == sql.ErrNoRows {
			return Reasons{}, problem.Usagef("unknown task %q", name)
		}
		return Reasons{}, fmt.Errorf("reading the reason codes of task %s: %w", name, err)
	}
	codes, err := ParseReasonCodes(row.Reasons.String)
	if err != nil {
		return Reasons{}, fmt.Errorf("task %s's stored reason codes: %w", name, err)
	}
	req, err := ParseRequireReason(row.Require.String)
	if err != nil {
		return Reasons{}, fmt.Errorf("task %s's stored required reasons: %w", name, err)
	}
	return Reasons{Codes: codes, Required: req}, nil
}

// ReasonChange is a change of a task's codes (task create, task update):
// nil keeps the current value.
type ReasonChange struct {
	Codes    *map[string][]string
	Required *[]string
}

// Given says whether the change changes anything.
func (c ReasonChange) Given() bool { return c.Codes != nil || c.Required != nil }

// apply returns the task's codes after the change, checked.
func (c ReasonChange) apply(cur Reasons) (Reasons, error) {
	if c.Codes != nil {
		cur.Codes = *c.Codes
	}
	if c.Required != nil {
		cur.Required = *c.Required
	}
	return cur, cur.check()
}

// CheckReasonChange checks a new task's codes (task create calls it
// before it connects); task update's are checked against the task's
// current codes by PlanTaskReasons.
func CheckReasonChange(c ReasonChange) error {
	_, err := c.apply(Reasons{})
	return err
}

// PlanTaskReasons checks a change against the task's current codes
// without writing anything (task update checks it before any other
// change is written).
func (a *Admin) PlanTaskReasons(ctx context.Context, name string, c ReasonChange) (Reasons, error) {
	t, err := a.Task(ctx, name)
	if err != nil {
		return Reasons{}, err
	}
	cur, err := a.TaskReasons(ctx, t)
	if err != nil {
		return Reasons{}, err
	}
	return c.apply(cur)
}

// SetTaskReasons changes a task's codes.
func (a *Admin) SetTaskReasons(ctx context.Context, name string, c ReasonChange) (Reasons, error) {
	r, err := a.PlanTaskReasons(ctx, name, c)
	if err != nil {
		return Reasons{}, err
	}
	t, err := a.Task(ctx, name)
	if err != nil {
		return Reasons{}, err
	}
	if err := a.writeReasons(ctx, a.db, t.ID, r); err != nil {
		return Reasons{}, fmt.Errorf("setting the reason codes of task %s: %w", name, err)
	}
	return r, nil
}

func (a *Admin) writeReasons(ctx context.Context, q drivers.Querier, id int64, r Reasons) error {
	_, err := a.reasonSQL().TaskSetReasons.Exec(ctx, q, taskReasonsParams{TaskID: id,
		Reasons: nullString(r.CodesText()), Require: nullString(r.RequiredText())})
	return err
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
