package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/internal/child"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	locks "github.com/loanq/loanq/namedlock"
	"github.com/loanq/loanq/problem"
)

func lockCommand() *cli.Command {
	return &cli.Command{
		Name:  "lock",
		Usage: "run a command on one node of a farm at a time (a named, renewed, fenced lease)",
		Description: `Named locks live in loanq's table loanq_lock, in the same database as the
queues, so every node that reaches the database sees the same lock. See
docs/algorithm.md, "Named locks".

Examples:
   loanq lock run nightly-export -- /usr/local/bin/export --all
   loanq lock run nightly-export --ttl 2m --wait 10m -- ./export.sh
   loanq lock list`,
		Subcommands: []*cli.Command{
			{
				Name:      "run",
				Usage:     "take the named lease, run CMD while renewing it, release it, exit with CMD's status",
				ArgsUsage: "NAME -- CMD [ARGS…]",
				Description: `Takes the lease NAME (free or expired, by the database clock), runs CMD with
LOANQ_LOCK_NAME and LOANQ_LOCK_TOKEN (the fencing token, larger at every take)
in its environment, renews the lease every --ttl/3 while CMD runs, releases it
when CMD ends and exits with CMD's exit status (128+N when signal N ended it).
SIGINT and SIGTERM sent to loanq are passed on to CMD; the lease is released
once CMD has ended. If loanq dies (SIGKILL), CMD's process group gets SIGTERM,
then SIGKILL after 5s or --ttl/3 if shorter: before the lease can expire.
CMD's environment is loanq's without loanq's own variables: no LOANQ_DB,
LOANQ_SERVE_TOKEN or other LOANQ_* (only the two above), no DATABASE_URL
when that is loanq's database, and no PGPASSWORD when loanq's database is
PostgreSQL (loanq's password when the DSN has none).

Held elsewhere: exit 75 at once, or with --wait D try again every 250ms for up
to D, then exit 75. If renewals fail until the lease has expired (or the lease
was taken over), CMD gets SIGTERM (SIGKILL if it is still running one --ttl
later) and loanq exits 1 saying the lease was lost.
Exit codes: CMD's status; 2 bad input (nothing taken); 75 held elsewhere;
1 lease lost or a database failure.

Examples:
   loanq lock run nightly-export -- /usr/local/bin/export --all
   loanq lock run nightly-export --ttl 2m --wait 10m -- sh -c 'export.sh "$LOANQ_LOCK_TOKEN"'`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "ttl", Value: locks.DefaultTTL.String(), Usage: "lease length (1s-24h); renewed every third of it"},
					&cli.StringFlag{Name: "wait", Value: "0s", Usage: "when held elsewhere, try again for up to this long before exit 75 (0s-24h)"},
					logFormatFlag(),
				},
				Action: lockRun,
			},
			{
				Name:      "list",
				Usage:     "show every named lock: holder (host:pid), state, token, taken and expiry times",
				ArgsUsage: " ",
				Description: `State is held, expired (its holder stopped renewing: the next taker gets it)
or free, by the database clock. Times are RFC 3339 UTC.

Examples:
   loanq lock list
   loanq --output json lock list`,
				Action: lockList,
			},
		},
	}
}

// lockRunArgs checks everything the user typed before the database is touched.
func lockRunArgs(c *cli.Context) (name, path string, argv []string, ttl, wait time.Duration, err error) {
	a := c.Args().Slice()
	if len(a) == 0 {
		return "", "", nil, 0, 0, problem.Usagef("`loanq lock run` needs a lock name and a command: loanq lock run NAME -- CMD [ARGS…]")
	}
	name = a[0]
	if err = locks.ValidateName(name); err != nil {
		return
	}
	if len(a) < 2 || a[1] == "" {
		return "", "", nil, 0, 0, problem.Usagef("no command to run under lock %q: give it after --, e.g. loanq lock run %s -- /usr/local/bin/job", name, name)
	}
	if ttl, err = flagvalue.Duration("ttl", c.String("ttl")); err != nil {
		return
	}
	if err = locks.ValidateTTL(ttl); err != nil {
		return
	}
	if wait, err = flagvalue.Duration("wait", c.String("wait")); err != nil {
		return
	}
	if wait < 0 || wait > locks.MaxWait {
		return "", "", nil, 0, 0, problem.Usagef("invalid --wait %s: give a duration from 0s (exit 75 at once when held) to 24h", wait)
	}
	if path, err = child.Resolve(a[1]); err != nil {
		return
	}
	return name, path, a[1:], ttl, wait, nil
}

func lockRun(c *cli.Context) error {
	name, path, argv, ttl, wait, err := lockRunArgs(c)
	if err != nil {
		return err
	}
	lg, err := newEventLog(c)
	if err != nil {
		return err
	}
	// loanq handles SIGINT/SIGTERM itself from here on: they go to CMD, and
	// the database calls (the release above all) must not be cancelled by
	// them, so they run on a context the signals do not cancel.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	ctx := context.WithoutCancel(c.Context)

	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	store := &locks.Store{DB: e.db, Driver: e.driver}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s:%d", host, os.Getpid())

	lease, err := store.Acquire(ctx, name, holder, ttl, wait, sigc)
	var held *locks.HeldError
	var interrupted *locks.InterruptedError
	switch {
	case errors.As(err, &held):
		msg := fmt.Sprintf("lock %s is held", name)
		if info := held.Info; info != nil {
			msg = fmt.Sprintf("lock %s is held by %s (token %d) until %s", name, info.Holder, info.Token, info.ExpiresAt.Format(time.RFC3339))
		}
		return &problem.Error{Kind: problem.Busy, Msg: msg, Hint: "try again later, or give --wait D to wait for it"}
	case errors.As(err, &interrupted):
		return &problem.Exit{Code: child.SignalStatus(interrupted.Signal), Msg: fmt.Sprintf("interrupted while waiting for lock %s; nothing was run", name)}
	case err != nil:
		return err
	}

	env := child.Environ(os.Environ(), c.String("db"), e.driver.Capabilities().PasswordEnv, "LOANQ_LOCK_NAME="+name, "LOANQ_LOCK_TOKEN="+strconv.FormatInt(lease.Token, 10))
	if lg.JSON() {
		lg.j.Info("lock taken", "lock", name, "holder", holder, "token", lease.Token, "ttl_ms", ttl.Milliseconds())
	}
	// In JSON mode each line CMD writes to stderr becomes an event.
	cmdErr := lg.Output(c.App.ErrWriter, "stderr", "lock", name, "token", lease.Token)
	p, err := child.Start(path, argv, env, locks.KillAfter(ttl), os.Stdin, c.App.Writer, cmdErr.writer())
	defer cmdErr.Flush()
	if err != nil {
		releaseLease(ctx, store, lease, lg)
		return fmt.Errorf("lock %s: start %s: %w", name, argv[0], err)
	}
	lost := store.Keep(ctx, lease, ttl, p, sigc, locks.KeepEvents{
		RenewFailed: func(err error) {
			lg.Event(slog.LevelWarn, fmt.Sprintf("loanq: lock %s: renewal failed, retrying: %v", lease.Name, err),
				"renewal failed, retrying", "lock", lease.Name, "token", lease.Token, "error", err.Error())
		},
		Lost: func(why string) {
			lg.Event(slog.LevelError, fmt.Sprintf("loanq: lock %s: lease lost; sending SIGTERM to the command", lease.Name),
				"lease lost; sending SIGTERM to the command", "lock", lease.Name, "token", lease.Token, "why", why)
		},
	})
	if lost != "" {
		// The lease is someone else's (or nobody's) now: nothing to release.
		return &problem.Exit{Code: problem.ExitFailure, Msg: fmt.Sprintf("lock %s: lease lost (%s); %s was stopped with SIGTERM", name, lost, argv[0])}
	}
	releaseLease(ctx, store, lease, lg)
	if st := p.Status(); st != 0 {
		return &problem.Exit{Code: st}
	}
	return nil
}

// releaseLease frees the lease once CMD has ended, and says so if it could
// not: the lease then ends at its expiry.
func releaseLease(ctx context.Context, store *locks.Store, lease *locks.Lease, stderr *eventLog) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := store.Release(rctx, lease)
	switch {
	case err != nil:
		stderr.Event(slog.LevelWarn, fmt.Sprintf("loanq: lock %s: %v; the lease ends at its expiry", lease.Name, err),
			"release failed; the lease ends at its expiry", "lock", lease.Name, "token", lease.Token, "error", err.Error())
	case !ok:
		stderr.Event(slog.LevelWarn, fmt.Sprintf("loanq: lock %s: at release the lease was no longer ours (token %d); nothing released", lease.Name, lease.Token),
			"at release the lease was no longer ours; nothing released", "lock", lease.Name, "token", lease.Token)
	case stderr.JSON():
		stderr.j.Info("lock released", "lock", lease.Name, "token", lease.Token)
	}
}

// lockView is one lock in `lock list --output json`.
type lockView struct {
	Name      string  `json:"name"`
	Holder    *string `json:"holder"`
	State     string  `json:"state"`
	Token     int64   `json:"token"`
	TakenAt   *string `json:"taken_at"`
	ExpiresAt *string `json:"expires_at"`
}

func lockList(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	list, err := (&locks.Store{DB: e.db, Driver: e.driver}).List(c.Context)
	if err != nil {
		return err
	}
	views := make([]lockView, len(list))
	for i, l := range list {
		views[i] = lockView{Name: l.Name, State: l.State, Token: l.Token, TakenAt: rfc3339(l.TakenAt), ExpiresAt: rfc3339(l.ExpiresAt)}
		if l.Holder != "" {
			h := l.Holder
			views[i].Holder = &h
		}
	}
	return emit(c, map[string]any{"locks": views}, func(w io.Writer) {
		if len(views) == 0 {
			fmt.Fprintln(w, "no named locks yet (`loanq lock run NAME -- CMD` creates one)")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tHOLDER\tSTATE\tTOKEN\tTAKEN AT\tEXPIRES AT")
		for _, v := range views {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", textsafe.Escape(v.Name), textsafe.Escape(dashIfNil(v.Holder)), v.State, v.Token, dashIfNil(v.TakenAt), dashIfNil(v.ExpiresAt))
		}
		tw.Flush()
	})
}

// rfc3339 formats a database time for JSON: RFC 3339 UTC, nil for none.
func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

func dashIfNil(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
