// Package commands is loanq's command line: one file per command, each thin —
// parse the flags, call the engine, print text or JSON.
package commands

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
	"github.com/urfave/cli/v2"
)

// Main runs loanq with args and returns the process exit code (README.md,
// "Exit codes"; problem.Kind maps errors to them).
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signalContext()
	defer stop()
	ran := false
	app := NewApp(stdout, stderr, &ran)
	args, err := helpAndCommands(app, args)
	if err != nil {
		fmt.Fprintf(stderr, "loanq: %s\n", err)
		return problem.ExitCode(err)
	}
	if args[len(args)-1] == "--generate-bash-completion" {
		// A shell asks what may follow (loanq completion bash|zsh|fish).
		// Only then: with completion on, urfave/cli v2 loses `--help` of
		// commands that have no flags (loanq version --help).
		app.EnableBashCompletion = true
	} else {
		args = reorderArgs(app, args)
	}
	err = app.RunContext(ctx, args)
	if err == nil {
		reportEnd(app, nil, problem.ExitOK)
		return problem.ExitOK
	}
	if problem.KindOf(err) == problem.Failure && drivers.IsPermissionDenied(err) {
		// The database refused this account the statement: a privilege it
		// was not granted, or a row it may not write (docs/security.md).
		// Nothing was changed; the same command will be refused again.
		err = problem.WithHint(problem.AsUsage(err, "refused by the database for this account"),
			"an admin grants what each role may do: `loanq grants --help`, docs/security.md")
	}
	if !ran && problem.KindOf(err) == problem.Failure {
		// urfave/cli failed before any action ran: a bad flag or argument.
		err = problem.AsUsage(err, "bad command line")
		err = problem.WithHint(err, "run `loanq --help` or `loanq COMMAND --help`")
	}
	if reportEnd(app, err, problem.ExitCode(err)) {
		return problem.ExitCode(err) // --log-format json: the end as a JSON event
	}
	if err.Error() != "" { // an exit status passed on from a command loanq ran says nothing more
		// Escaped: a message may quote a name or criteria read from the database.
		fmt.Fprintf(stderr, "loanq: %s\n", textsafe.Escape(err.Error()))
	}
	return problem.ExitCode(err)
}

// signalContext is cancelled by the first SIGINT or SIGTERM, with a
// *problem.Signal as its cause (context.Cause), so a command interrupted
// while it waits can clean up (a pending request is cancelled) and exit 130
// or 143 as a shell would.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			if s == syscall.SIGTERM {
				cancel(&problem.Signal{Name: "SIGTERM", Code: problem.ExitSIGTERM})
			} else {
				cancel(&problem.Signal{Name: "SIGINT", Code: problem.ExitSIGINT})
			}
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// NewApp builds the command tree; ran is set once an action starts, so Main
// can tell flag errors (usage) from failures of the action itself.
func NewApp(stdout, stderr io.Writer, ran *bool) *cli.App {
	app := &cli.App{
		Name:    "loanq",
		Usage:   "hand out work to human processors through your database's row locks",
		Version: Version,
		Description: `loanq keeps work queues ("tasks") in a relational database and hands each
processor the highest-priority loans of a task that nobody else has. Callers on
different machines are coordinated by the database's locks, never by memory.

Examples:
   loanq demo                                   # see it work on the embedded SQLite default
   loanq --db postgres://app@db:5432/loans migrate up
   loanq task create verify-bank --where "statements_submitted = 1 AND statements_verified = 0" --order "submitted_at"
   loanq --user oliver work get verify-bank --count 3
   loanq --user oliver disposition verify-bank 123 return --after 4h`,
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		ExitErrHandler:         func(*cli.Context, error) {}, // Main maps errors to exit codes
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "db", EnvVars: []string{"LOANQ_DB", "DATABASE_URL"}, Value: dsn.Default,
				Usage: "database `DSN`: postgres://…, mysql://user:pass@host:port/db, oracle://user:pass@host:port/service, sqlite:PATH (DATABASE_URL is read when LOANQ_DB is not set)"},
			// No Value: the OS user lookup (NSS, /etc/passwd) costs about a
			// millisecond per process, so it runs only when no name is given.
			&cli.StringFlag{Name: "user", EnvVars: []string{"LOANQ_USER"}, DefaultText: "the OS user name", Usage: "acting processor `NAME`"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, EnvVars: []string{"LOANQ_OUTPUT"}, Value: "text", Usage: "output format: text or json"},
		},
		Commands: []*cli.Command{
			migrateCommand(),
			taskCommand(),
			workCommand(),
			dispositionCommand(),
			pipelineCommand(),
			sqlCommand(),
			grantsCommand(),
			demoCommand(),
			benchCommand(),
			lockCommand(),
			explainCommand(),
			serveCommand(),
			pruneCommand(),
			historyCommand(),
			tokenCommand(),
			groupCommand(),
			versionCommand(),
			completionCommand(),
		},
	}
	app.Before = func(c *cli.Context) error {
		// LOANQ_OUTPUT=JSON works as json: one spelling for every command.
		switch out := strings.ToLower(strings.TrimSpace(c.String("output"))); out {
		case "text", "json", "":
			return c.Set("output", out)
		}
		return problem.Usagef("invalid --output %q: use text or json", c.String("output"))
	}
	app.OnUsageError = usageError
	markRan(app.Commands, ran)
	return app
}

// markRan wraps every action so Main knows whether flag parsing succeeded.
func markRan(cmds []*cli.Command, ran *bool) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		if c.Action != nil {
			act := c.Action
			c.Action = func(ctx *cli.Context) error { *ran = true; return act(ctx) }
		}
		markRan(c.Subcommands, ran)
	}
}

func defaultUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// env is what an action needs: an engine on an open, current database.
type env struct {
	*dispatch.Engine
	// admin is the admin surface over the same database: tasks, tokens,
	// groups, prune, audit, stats.
	admin *dispatch.Admin
	// db and driver are the connection, for what a command runs beside
	// the engine (lock run's named lock).
	db     *sql.DB
	driver drivers.Driver
	user   string
	json   bool
	out    io.Writer
}

func (e *env) Close() { e.db.Close() }

// open connects to --db and checks its schema. The embedded SQLite default
// migrates itself so that a newcomer needs no extra step. The command is
// brief (schema.Options.Brief): it sends each statement about once.
func open(c *cli.Context) (*env, error) { return openEnv(c, true) }

// openLasting is open for a command that repeats its statements for as
// long as it runs (lock run, task refill --every, work run): the driver
// keeps them prepared on the server where it does so.
func openLasting(c *cli.Context) (*env, error) { return openEnv(c, false) }

func openEnv(c *cli.Context, brief bool) (*env, error) {
	db, err := openDB(c, schema.Options{Migrate: schema.IfSelfMigrating, Check: true, Brief: brief})
	if err != nil {
		return nil, err
	}
	user := c.String("user")
	if !c.IsSet("user") {
		user = defaultUser()
	}
	eng := dispatch.New(db.DB, db.Driver)
	return &env{Engine: eng, admin: eng.Admin(), db: db.DB, driver: db.Driver, user: user,
		json: c.String("output") == "json", out: c.App.Writer}, nil
}

// openActing is open for the commands that act as a user (work get,
// status, cancel, run and reclaim; disposition; pipeline; task create and
// update): the database decides whom its account may act as
// (dispatch.ActingUser, docs/security.md), and the OS user lookup runs only
// when no name was given. Read-only commands do not ask.
func openActing(c *cli.Context) (*env, error) { return actingAs(c, open) }

// openActingLasting is openActing for a command that repeats its
// statements (openLasting): work run.
func openActingLasting(c *cli.Context) (*env, error) { return actingAs(c, openLasting) }

func actingAs(c *cli.Context, open func(*cli.Context) (*env, error)) (*env, error) {
	e, err := open(c)
	if err != nil {
		return nil, err
	}
	requested, fallback := "", e.user
	if c.IsSet("user") {
		requested, fallback = c.String("user"), ""
	}
	if e.user, err = e.ActingUser(c.Context, requested, fallback); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// openDB opens --db (schema.Open). A file database the user named must
// exist: only `migrate up` and `demo` create one (openCreating); the
// zero-set-up default (no --db, LOANQ_DB or DATABASE_URL) creates itself.
//
// The default is named on stderr each time it is used, and said to be new
// when this command created it: `task list` in a new directory otherwise
// answers "no tasks yet" about a file nobody asked for.
func openDB(c *cli.Context, opts schema.Options) (*schema.Database, error) {
	opts.MustExist = c.IsSet("db")
	opts.ConnectTimeout = connectTimeout
	if c.IsSet("db") || c.String("db") != dsn.Default {
		return schema.Open(c.Context, c.String("db"), opts)
	}
	path := strings.TrimPrefix(dsn.Default, "sqlite:")
	_, statErr := os.Stat(path)
	db, err := schema.Open(c.Context, c.String("db"), opts)
	if err != nil {
		return nil, err
	}
	if abs, aerr := filepath.Abs(path); aerr == nil {
		path = abs
	}
	verb := "using"
	if errors.Is(statErr, fs.ErrNotExist) {
		verb = "created"
	}
	fmt.Fprintf(c.App.ErrWriter, "loanq: %s the default database %s (no --db, LOANQ_DB or DATABASE_URL given; set one to use another)\n",
		verb, textsafe.Escape(path))
	return db, nil
}

// openCreating opens --db as it is, creating a file database that does not
// exist yet (`migrate up`).
func openCreating(c *cli.Context) (*schema.Database, error) {
	return schema.Open(c.Context, c.String("db"), schema.Options{ConnectTimeout: connectTimeout})
}

// connectTimeout bounds a command's connecting to the database.
const connectTimeout = 30 * time.Second

// emit prints v as one JSON document, or calls text for people.
func emit(c *cli.Context, v any, text func(w io.Writer)) error {
	if c.String("output") == "json" {
		return jsondoc.Write(c.App.Writer, v)
	}
	text(c.App.Writer)
	return nil
}

// args returns the command's positional arguments, which must be exactly as
// many as names (their names, for the usage error); otherwise exit 2.
func args(c *cli.Context, names ...string) ([]string, error) {
	if c.NArg() != len(names) {
		want := strings.Join(names, " ")
		if want == "" {
			want = "none"
		}
		return nil, problem.Usagef("`%s` takes %d argument(s): %s (got %d); see `%s --help`",
			c.Command.HelpName, len(names), want, c.NArg(), c.Command.HelpName)
	}
	return c.Args().Slice(), nil
}

// usageError replaces urfave/cli's "Incorrect Usage" plus full help with one
// line that says what was wrong and where to read more.
func usageError(c *cli.Context, err error, _ bool) error {
	name := "loanq"
	if c.Command != nil && c.Command.HelpName != "" {
		name = c.Command.HelpName
	}
	return &problem.Error{Kind: problem.Usage, Msg: err.Error(), Hint: "see `" + name + " --help`"}
}
