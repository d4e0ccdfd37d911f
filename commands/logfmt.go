package commands

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

// jsonLogKey is where a command that logs JSON leaves its logger in the
// app's metadata, so that Main reports the command's end (its error and
// exit code) as one more JSON event instead of a "loanq: …" line.
const jsonLogKey = "loanq.jsonlog"

// logFormatFlag is --log-format of the long-running commands (serve, work
// run, lock run, task refill): text (the default: lines for people, as
// before) or json (log/slog's JSON handler: one object per line on stderr
// with time, level, msg and fields; docs/operations.md).
func logFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"LOANQ_LOG_FORMAT"},
		Usage: "how stderr reports events: `FORMAT` text (lines for people) or json (one JSON object per line with time, level, msg and fields such as task, user, request, loan, exit; for a log collector)"}
}

// eventLog is where a long-running command reports what happens to it on
// stderr: in text mode the lines it always printed, unchanged; in json mode
// one slog event per line.
type eventLog struct {
	w io.Writer
	j *slog.Logger // nil in text mode
}

// newEventLog reads --log-format. A JSON logger is also left in the app's
// metadata for Main (jsonLogKey).
func newEventLog(c *cli.Context) (*eventLog, error) {
	switch f := strings.ToLower(strings.TrimSpace(c.String("log-format"))); f {
	case "text", "":
		return &eventLog{w: c.App.ErrWriter}, nil
	case "json":
		j := slog.New(slog.NewJSONHandler(c.App.ErrWriter, nil))
		if c.App.Metadata == nil {
			c.App.Metadata = map[string]any{}
		}
		c.App.Metadata[jsonLogKey] = j
		return &eventLog{w: c.App.ErrWriter, j: j}, nil
	default:
		return nil, problem.Usagef("invalid --log-format %q: give text or json", c.String("log-format"))
	}
}

// JSON reports whether events are JSON.
func (l *eventLog) JSON() bool { return l.j != nil }

// Event reports one event: text (one line, printed as it is) in text mode;
// msg with attrs (key, value pairs) in json mode.
func (l *eventLog) Event(level slog.Level, text, msg string, attrs ...any) {
	if l.j == nil {
		io.WriteString(l.w, text+"\n")
		return
	}
	l.j.Log(context.Background(), level, msg, attrs...)
}

// Output is where a child command's stream goes: w itself in text mode; in
// json mode a writer that makes each line an event (msg "command output",
// the stream, the line, and attrs). Flush it once the command has ended, for
// a last line without its newline.
func (l *eventLog) Output(w io.Writer, stream string, attrs ...any) *lineEvents {
	return &lineEvents{l: l, w: w, attrs: append([]any{"stream", stream}, attrs...)}
}

// lineEvents turns a stream into one event per line (json mode) or passes
// it through (text mode).
type lineEvents struct {
	l     *eventLog
	w     io.Writer
	attrs []any
	mu    sync.Mutex
	buf   []byte
}

func (e *lineEvents) Write(p []byte) (int, error) {
	if e.l.j == nil {
		return e.w.Write(p)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = append(e.buf, p...)
	for {
		i := bytes.IndexByte(e.buf, '\n')
		if i < 0 {
			break
		}
		e.emit(e.buf[:i])
		e.buf = e.buf[i+1:]
	}
	return len(p), nil
}

// Flush reports what is left of a last line without its newline.
func (e *lineEvents) Flush() {
	if e.l.j == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.buf) > 0 {
		e.emit(e.buf)
		e.buf = nil
	}
}

func (e *lineEvents) emit(line []byte) {
	s := strings.TrimSuffix(string(line), "\r")
	e.l.j.Info("command output", append(append([]any{}, e.attrs...), "line", textsafe.Escape(s))...)
}

// writer returns the stream for exec: w itself in text mode, so that a
// command writing to a terminal still sees one.
func (e *lineEvents) writer() io.Writer {
	if e.l.j == nil {
		return e.w
	}
	return e
}

// reportEnd is Main's report of a command that logged JSON: its error (if
// any) and its exit code as one event. It returns false when the command did
// not log JSON (Main prints its "loanq: …" line).
func reportEnd(app *cli.App, err error, code int) bool {
	j, _ := app.Metadata[jsonLogKey].(*slog.Logger)
	if j == nil {
		return false
	}
	if err == nil {
		j.Info("exit", "exit", code)
		return true
	}
	level := slog.LevelError
	if code == problem.ExitOK {
		level = slog.LevelInfo
	}
	msg := textsafe.Escape(err.Error())
	if msg == "" {
		msg = "exit" // an exit status passed on from a command loanq ran
	}
	j.Log(context.Background(), level, msg, "exit", code)
	return true
}
