// Package throwaway starts a PostgreSQL or MariaDB server of its own for one
// test, from the binaries installed on the machine, the way
// scripts/test-servers.sh does: a temporary directory, a free port, initdb and
// pg_ctl as the postgres user when running as root; mariadb-install-db and
// mariadbd --no-defaults. Tests may stop, kill and restart these servers; the
// shared servers on 5432/3306 are never touched. Everything is stopped and
// removed in t.Cleanup.
//
// Missing binaries skip the test, or fail it when LOANQ_TEST_REQUIRE names the
// dialect.
package throwaway

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/all" // the readiness check opens any dialect
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Server is one throwaway database server.
type Server struct {
	Dialect string // postgres or mysql
	// DSN is a loanq DSN of an empty database on the server, ready for
	// `loanq migrate up`.
	DSN  string
	Port int
	Dir  string

	t       testing.TB
	bin     map[string]string
	pgUser  string    // postgres: the OS user the cluster runs as
	mysqld  *exec.Cmd // mysql: the running mariadbd
	extra   []string  // mysql: more mariadbd options (MariaDBWith)
	exited  chan struct{}
	logPath string
}

// Postgres starts a PostgreSQL server for this test.
func Postgres(t testing.TB) *Server {
	t.Helper()
	bin := map[string]string{}
	for _, name := range []string{"initdb", "pg_ctl"} {
		p := pgBin(name)
		if p == "" {
			missing(t, "postgres", "PostgreSQL's "+name+" is not installed (Debian: apt-get install postgresql)")
		}
		bin[name] = p
	}
	s := &Server{Dialect: "postgres", t: t, bin: bin, Port: freePort(t), Dir: tempDir(t)}
	s.pgUser = pgUser(t)
	data := s.data()
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := chownTo(data, s.pgUser); err != nil {
		t.Fatalf("giving %s to %s: %v", data, s.pgUser, err)
	}
	s.logPath = filepath.Join(data, "server.log")
	if out, err := s.asPG(bin["initdb"], "-D", data, "-U", "postgres", "--auth=trust", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb of a throwaway PostgreSQL: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = s.asPG(bin["pg_ctl"], "-D", data, "-m", "immediate", "stop").Run()
	})
	s.pgctl("start")
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	s.WaitReady()
	return s
}

func (s *Server) data() string { return filepath.Join(s.Dir, "pg") }

func (s *Server) asPG(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", s.pgUser, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func (s *Server) pgctl(action string, extra ...string) {
	s.t.Helper()
	args := []string{"-D", s.data(), "-w", "-t", "120", "-l", s.logPath,
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", s.Port, s.data())}
	args = append(args, extra...)
	args = append(args, action)
	if out, err := s.asPG(s.bin["pg_ctl"], args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.logPath)
		s.t.Fatalf("pg_ctl %s: %v\n%s\n%s", action, err, out, tail(log))
	}
}

// MariaDB starts a MariaDB (or MySQL) server for this test.
func MariaDB(t testing.TB) *Server {
	t.Helper()
	return MariaDBWith(t)
}

// MariaDBWith starts a MariaDB server for this test with more mariadbd
// options, e.g. --ssl-cert=… --ssl-key=… for a TLS test.
func MariaDBWith(t testing.TB, options ...string) *Server {
	t.Helper()
	server := firstOf("mariadbd", "mysqld", "/usr/sbin/mariadbd", "/usr/sbin/mysqld")
	installer := firstOf("mariadb-install-db", "mysql_install_db")
	if server == "" || installer == "" {
		missing(t, "mysql", "MariaDB's mariadbd and mariadb-install-db are not installed (Debian: apt-get install mariadb-server)")
	}
	s := &Server{Dialect: "mysql", t: t, bin: map[string]string{"server": server}, Port: freePort(t), Dir: tempDir(t), extra: options}
	data := s.mysqlData()
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Its own temporary directory: with the default /tmp, the bootstrap's
	// internal temporary tables met other processes' clean-ups of /tmp
	// ("Could not remove temporary table '/tmp/#sql-temptable-…'", then
	// "Installation of system tables failed").
	if err := os.MkdirAll(s.mysqlTmp(), 0o755); err != nil {
		t.Fatal(err)
	}
	s.logPath = filepath.Join(s.Dir, "mariadb.log")
	out, err := exec.Command(installer, "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+s.mysqlTmp()).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db of a throwaway MariaDB: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.stopMySQL(syscall.SIGKILL) })
	s.startMySQL()
	base := fmt.Sprintf("mysql://root:@127.0.0.1:%d/mysql", s.Port)
	s.DSN = base
	s.WaitReady()
	_, db, _, err := drivers.Connect(context.Background(), base)
	if err != nil {
		t.Fatalf("connecting to the throwaway MariaDB: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE loanq"); err != nil {
		t.Fatalf("CREATE DATABASE on the throwaway MariaDB: %v", err)
	}
	s.DSN = fmt.Sprintf("mysql://root:@127.0.0.1:%d/loanq", s.Port)
	return s
}

func (s *Server) mysqlData() string { return filepath.Join(s.Dir, "mariadb") }
func (s *Server) mysqlTmp() string  { return filepath.Join(s.Dir, "mariadb-tmp") }

func (s *Server) startMySQL() {
	s.t.Helper()
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	data := s.mysqlData()
	cmd := exec.Command(s.bin["server"], "--no-defaults", "--datadir="+data, "--user="+currentUser(),
		fmt.Sprintf("--port=%d", s.Port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(data, "mysqld.sock"), "--pid-file="+filepath.Join(data, "mysqld.pid"),
		"--skip-log-bin", "--innodb-flush-log-at-trx-commit=2", "--max-connections=300", "--tmpdir="+s.mysqlTmp())
	cmd.Args = append(cmd.Args, s.extra...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("starting mariadbd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	s.mysqld, s.exited = cmd, exited
}

func (s *Server) stopMySQL(sig syscall.Signal) {
	if s.mysqld == nil {
		return
	}
	_ = s.mysqld.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		_ = s.mysqld.Process.Kill()
		<-s.exited
	}
	s.mysqld = nil
}

// Restart stops the server and starts it again on the same data directory.
// crash true stops it the hard way (pg_ctl -m immediate; SIGKILL of
// mariadbd), false the clean way (pg_ctl -m fast; SIGTERM). Either way the
// server ends every session, open transactions included, at once. It returns
// once the server accepts connections again.
func (s *Server) Restart(crash bool) {
	s.t.Helper()
	switch s.Dialect {
	case "postgres":
		mode := "fast"
		if crash {
			mode = "immediate"
		}
		s.pgctl("restart", "-m", mode)
	case "mysql":
		sig := syscall.SIGTERM
		if crash {
			sig = syscall.SIGKILL
		}
		s.stopMySQL(sig)
		s.startMySQL()
	}
	s.WaitReady()
}

// WaitReady waits until the server accepts loanq's connections.
func (s *Server) WaitReady() {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		if s.exited != nil {
			select {
			case <-s.exited:
				log, _ := os.ReadFile(s.logPath)
				s.t.Fatalf("the throwaway %s server exited:\n%s", s.Dialect, tail(log))
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, db, _, err := drivers.Connect(ctx, s.DSN)
		cancel()
		if err == nil {
			db.Close()
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(s.logPath)
	s.t.Fatalf("the throwaway %s server on port %d did not accept connections within 2 minutes: %v\n%s", s.Dialect, s.Port, last, tail(log))
}

func missing(t testing.TB, dialect, why string) {
	t.Helper()
	if testdb.Required(dialect) {
		t.Fatalf("%s is required (LOANQ_TEST_REQUIRE) but no throwaway server can be started: %s", dialect, why)
	}
	t.Skipf("no throwaway %s server: %s", dialect, why)
}

func pgBin(name string) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // the newest version first
		p := filepath.Join(dirs[i], name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	p, _ := exec.LookPath(name)
	return p
}

func firstOf(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// pgUser is the OS user the cluster runs as: PostgreSQL refuses root.
func pgUser(t testing.TB) string {
	if os.Geteuid() != 0 {
		return currentUser()
	}
	for _, name := range []string{"postgres", "nobody"} {
		if _, err := user.Lookup(name); err == nil {
			return name
		}
	}
	missing(t, "postgres", "running as root and there is no postgres (or nobody) user to run PostgreSQL as")
	return ""
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

func chownTo(path, name string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

// tempDir is a directory other users can traverse (the postgres user must
// reach its data directory inside), removed when the test ends.
func tempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "loanq-throwaway-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // registered first, so it runs after the server stops
	return dir
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
