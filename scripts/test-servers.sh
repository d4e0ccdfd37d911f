# shellcheck shell=bash
# Sourced by scripts/test.sh. Makes sure a PostgreSQL and a MariaDB/MySQL
# server are reachable for the tests and exports their DSNs:
#
#   1. a DSN already in LOANQ_TEST_POSTGRES_DSN / LOANQ_TEST_MYSQL_DSN is used as is;
#   2. else a server running on the default local port (5432 / 3306) that
#      accepts the default test login;
#   3. else a throwaway server started from the installed binaries in a
#      temporary directory on a spare port (55432 / 53306), stopped on exit;
#   4. else, when running as root, the server package is installed with
#      apt-get and step 3 is taken;
#   5. else the run fails, saying what to install.
# LOANQ_TEST_INSTALL=0 turns step 4 (and every other apt-get install here)
# off: check_requirements then fails at once with the list of every missing
# Debian package. apt-get's output goes to a log file, shown only when it
# fails.
#
# Nothing here changes a server it did not start.

# One temporary directory holds every throwaway server; it is created here,
# in the sourcing shell, so that the EXIT trap of scripts/test.sh knows it.
LOANQ_THROWAWAY_DIR=$(mktemp -d /tmp/loanq-test-servers.XXXXXX)
chmod 755 "$LOANQ_THROWAWAY_DIR"

# Where the server binaries are looked for besides the PATH, and the local
# ports of running servers: variables so that a test can point them away
# from this machine's (e2e/testservers_test.go).
: "${LOANQ_TEST_SBIN:=/usr/sbin}" "${LOANQ_TEST_PGLIB:=/usr/lib/postgresql}"
: "${LOANQ_TEST_PG_PORT:=5432}" "${LOANQ_TEST_MYSQL_PORT:=3306}"

say() { printf 'test-servers: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# port_open HOST PORT: true when something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

throwaway_dir() { printf '%s' "$LOANQ_THROWAWAY_DIR"; }

# stop_test_servers stops only the throwaway servers this script started.
stop_test_servers() {
	local dir=$LOANQ_THROWAWAY_DIR
	[ -n "$dir" ] || return 0
	if [ -f "$dir/pgbouncer/pgbouncer.pid" ]; then
		# SIGTERM: immediate shutdown; its clients are the finished tests.
		# PgBouncer removes its pid file before it exits: the pid is read once.
		local pid
		pid=$(cat "$dir/pgbouncer/pgbouncer.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	if [ -f "$dir/pg/PG_VERSION" ]; then
		as_pg_user "$(pg_bin pg_ctl)" -D "$dir/pg" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ -f "$dir/mariadb.pid" ]; then
		# SIGTERM is MariaDB's clean shutdown; wait so the datadir can go.
		kill "$(cat "$dir/mariadb.pid")" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$(cat "$dir/mariadb.pid")" 2>/dev/null || break
			sleep 0.2
		done
	fi
	rm -rf "$dir"
}

# ---------------------------------------------------------------- PostgreSQL

pg_bin() {
	local name=$1 dir
	for dir in "$LOANQ_TEST_PGLIB"/*/bin; do
		if [ -x "$dir/$name" ]; then printf '%s/%s' "$dir" "$name"; return 0; fi
	done
	command -v "$name" 2>/dev/null
}

# PostgreSQL refuses to run as root: the throwaway cluster runs as the
# postgres user when there is one, else as nobody.
pg_user() {
	if [ "$(id -u)" != 0 ]; then id -un; elif id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}

as_pg_user() {
	if [ "$(id -u)" = 0 ]; then runuser -u "$(pg_user)" -- "$@"; else "$@"; fi
}

pg_accepts() { # DSN-less check of the default login through psql when present
	local host=$1 port=$2
	port_open "$host" "$port" || return 1
	if command -v psql >/dev/null; then
		psql "postgresql://postgres@$host:$port/postgres?sslmode=disable&connect_timeout=5" -Atqc 'SELECT 1' >/dev/null 2>&1
	fi
}

start_throwaway_postgres() {
	local initdb pgctl dir port=55432
	initdb=$(pg_bin initdb) && pgctl=$(pg_bin pg_ctl) || return 1
	dir=$(throwaway_dir)/pg
	mkdir -p "$dir" && chown "$(pg_user)" "$dir" && chmod 700 "$dir"
	say "starting a throwaway PostgreSQL on 127.0.0.1:$port in $dir"
	as_pg_user "$initdb" -D "$dir" -U postgres --auth=trust --no-sync >"$dir.initdb.log" 2>&1 ||
		{ cat "$dir.initdb.log" >&2; return 1; }
	as_pg_user "$pgctl" -D "$dir" -w -t 60 -l "$dir/server.log" \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null ||
		{ cat "$dir/server.log" >&2; return 1; }
	export LOANQ_TEST_POSTGRES_DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

ensure_postgres() {
	if [ -n "${LOANQ_TEST_POSTGRES_DSN:-}" ]; then
		say "PostgreSQL: using LOANQ_TEST_POSTGRES_DSN"
		return
	fi
	if pg_accepts 127.0.0.1 "$LOANQ_TEST_PG_PORT"; then
		say "PostgreSQL: using the server running on 127.0.0.1:$LOANQ_TEST_PG_PORT"
		export LOANQ_TEST_POSTGRES_DSN="postgres://postgres@127.0.0.1:$LOANQ_TEST_PG_PORT/postgres?sslmode=disable"
		return
	fi
	if [ -z "$(pg_bin initdb)" ] && may_install; then
		say "PostgreSQL: no server running and none installed: installing it with apt-get"
		apt_install postgresql
	fi
	[ -n "$(pg_bin initdb)" ] ||
		die "PostgreSQL is required: start one on 127.0.0.1:5432 (user postgres, trust), set LOANQ_TEST_POSTGRES_DSN, or install it (Debian: apt-get install postgresql)"
	start_throwaway_postgres || die "PostgreSQL: could not start a throwaway server (see above)"
}

# ------------------------------------------------------------- MariaDB/MySQL

mysql_client() { command -v mariadb || command -v mysql; }

mysql_accepts() {
	local host=$1 port=$2 client
	port_open "$host" "$port" || return 1
	client=$(mysql_client) || return 0
	"$client" --protocol=tcp -h "$host" -P "$port" -u root --connect-timeout=5 -e 'SELECT 1' test >/dev/null 2>&1
}

mysql_server() { command -v mariadbd || command -v mysqld || { [ -x "$LOANQ_TEST_SBIN/mariadbd" ] && echo "$LOANQ_TEST_SBIN/mariadbd"; } || { [ -x "$LOANQ_TEST_SBIN/mysqld" ] && echo "$LOANQ_TEST_SBIN/mysqld"; }; }
mysql_installer() { command -v mariadb-install-db || command -v mysql_install_db; }

start_throwaway_mariadb() {
	local server installer dir port=53306 client
	server=$(mysql_server) && installer=$(mysql_installer) || return 1
	dir=$(throwaway_dir)/mariadb
	mkdir -p "$dir"
	say "starting a throwaway MariaDB on 127.0.0.1:$port in $dir"
	"$installer" --no-defaults --datadir="$dir" --user="$(id -un)" --auth-root-authentication-method=normal \
		--skip-test-db >"$dir.install.log" 2>&1 || { cat "$dir.install.log" >&2; return 1; }
	"$server" --no-defaults --datadir="$dir" --user="$(id -un)" --port=$port --bind-address=127.0.0.1 \
		--socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --skip-log-bin --innodb-flush-log-at-trx-commit=2 \
		--max-connections=300 >"$dir.server.log" 2>&1 &
	echo $! >"$(throwaway_dir)/mariadb.pid"
	client=$(mysql_client)
	for _ in $(seq 1 150); do
		if port_open 127.0.0.1 $port; then
			if [ -z "$client" ] || "$client" --protocol=tcp -h 127.0.0.1 -P $port -u root -e 'CREATE DATABASE IF NOT EXISTS test' 2>/dev/null; then
				export LOANQ_TEST_MYSQL_DSN="mysql://root:@127.0.0.1:$port/test"
				return 0
			fi
		fi
		sleep 0.2
	done
	cat "$dir.server.log" >&2
	return 1
}

ensure_mysql() {
	if [ -n "${LOANQ_TEST_MYSQL_DSN:-}" ]; then
		say "MariaDB/MySQL: using LOANQ_TEST_MYSQL_DSN"
		return
	fi
	if mysql_accepts 127.0.0.1 "$LOANQ_TEST_MYSQL_PORT"; then
		say "MariaDB/MySQL: using the server running on 127.0.0.1:$LOANQ_TEST_MYSQL_PORT"
		export LOANQ_TEST_MYSQL_DSN="mysql://root:@127.0.0.1:$LOANQ_TEST_MYSQL_PORT/test"
		return
	fi
	if [ -z "$(mysql_server)" ] && may_install; then
		say "MariaDB: no server running and none installed: installing it with apt-get"
		apt_install mariadb-server
	fi
	[ -n "$(mysql_server)" ] && [ -n "$(mysql_installer)" ] ||
		die "MariaDB or MySQL is required: start one on 127.0.0.1:3306 (root, empty password, database test), set LOANQ_TEST_MYSQL_DSN, or install it (Debian: apt-get install mariadb-server)"
	start_throwaway_mariadb || die "MariaDB: could not start a throwaway server (see above)"
}

# ----------------------------------------------------------------- PgBouncer

# The PgBouncer tests (drivers/postgres/pooler_test.go; the "pgbouncer"
# subtests of every test run through testdb.EachPooled: dispatch/
# contention_test.go, dispatch_test.go, hold_test.go, rowsfresh_test.go,
# rowsheld_test.go, e2e/contention_test.go, fault_kill_test.go, work_test.go;
# and e2e/fault_stop_test.go's own loop over testdb.PgBouncer) need a
# PgBouncer in transaction pooling mode in front of the test PostgreSQL:
#
#   1. a DSN already in LOANQ_TEST_PGBOUNCER_DSN is used as is (it must be a
#      transaction-mode PgBouncer in front of the server of
#      LOANQ_TEST_POSTGRES_DSN, with a `*` fallback database);
#   2. else a throwaway PgBouncer started from the installed pgbouncer, in the
#      temporary directory, on a spare port from 56432, stopped on exit;
#   3. else, when running as root, Debian's pgbouncer is installed with
#      apt-get and step 2 is taken;
#   4. else the run fails, saying what to install.
#
# Its configuration is PgBouncer's defaults but for what a throwaway needs:
# no ignore_startup_parameters and no max_prepared_statements, so loanq is
# tested with what a stock PgBouncer refuses.

pgbouncer_bin() { command -v pgbouncer 2>/dev/null || { [ -x "$LOANQ_TEST_SBIN/pgbouncer" ] && echo "$LOANQ_TEST_SBIN/pgbouncer"; }; }

start_throwaway_pgbouncer() {
	local bin dir port user="" pass="" host="" pgport=5432 rest auth hostport auth_type=trust
	bin=$(pgbouncer_bin) || return 1
	# The server behind it: host, port, user and password of LOANQ_TEST_POSTGRES_DSN.
	rest=${LOANQ_TEST_POSTGRES_DSN#*://}
	if [[ $rest == *@* ]]; then auth=${rest%%@*}; rest=${rest#*@}; else auth=""; fi
	hostport=${rest%%[/?]*}
	user=${auth%%:*}
	if [[ $auth == *:* ]]; then pass=${auth#*:}; pass=$(printf '%b' "${pass//%/\\x}"); fi # %XX decoded
	host=${hostport%:*}
	[[ $hostport == *:* ]] && pgport=${hostport##*:}
	[ -n "$user" ] || user=postgres
	[ -n "$host" ] || { say "PgBouncer: LOANQ_TEST_POSTGRES_DSN names no TCP host"; return 1; }
	[ -n "$pass" ] && auth_type=plain
	local first=56432 tries=0
	dir=$(throwaway_dir)/pgbouncer
	mkdir -p "$dir"
	printf '"%s" "%s"\n' "$user" "${pass//\"/\"\"}" >"$dir/userlist.txt"
	# A port that nothing answers on may still be taken (a server of a run
	# that just ended, still closing): PgBouncer then fails with "Address
	# already in use", and the next free port is tried, up to five times.
	while :; do
		for port in $(seq "$first" 56532); do port_open 127.0.0.1 "$port" || break; done
		cat >"$dir/pgbouncer.ini" <<-INI
			[databases]
			; every database (each test creates its own) on the test server
			* = host=$host port=$pgport
			[pgbouncer]
			pool_mode = transaction
			listen_addr = 127.0.0.1
			listen_port = $port
			unix_socket_dir =
			auth_type = $auth_type
			auth_file = $dir/userlist.txt
			max_client_conn = 500
			default_pool_size = 40
			logfile = $dir/pgbouncer.log
			pidfile = $dir/pgbouncer.pid
		INI
		chmod 600 "$dir/userlist.txt"
		# PgBouncer refuses to run as root: like the throwaway PostgreSQL, it runs
		# as the postgres user (else nobody) when this script runs as root.
		[ "$(id -u)" = 0 ] && chown -R "$(pg_user)" "$dir"
		say "starting a throwaway PgBouncer (transaction pooling) on 127.0.0.1:$port in front of $host:$pgport"
		: >"$dir/pgbouncer.log"
		[ "$(id -u)" = 0 ] && chown "$(pg_user)" "$dir/pgbouncer.log"
		as_pg_user "$bin" -d "$dir/pgbouncer.ini" >"$dir/start.log" 2>&1 && break
		tries=$((tries + 1))
		if [ "$tries" -lt 5 ] && grep -q "Address already in use" "$dir/start.log" "$dir/pgbouncer.log" 2>/dev/null; then
			say "PgBouncer: 127.0.0.1:$port is taken: trying the next port"
			first=$((port + 1))
			continue
		fi
		cat "$dir/start.log" "$dir/pgbouncer.log" >&2
		return 1
	done
	for _ in $(seq 1 100); do
		if port_open 127.0.0.1 "$port"; then
			local cred=$user
			[ -n "$pass" ] && cred="$user:${auth#*:}"
			export LOANQ_TEST_PGBOUNCER_DSN="postgres://$cred@127.0.0.1:$port/postgres?sslmode=disable"
			return 0
		fi
		sleep 0.1
	done
	cat "$dir/pgbouncer.log" >&2
	return 1
}

ensure_pgbouncer() {
	if [ -n "${LOANQ_TEST_PGBOUNCER_DSN:-}" ]; then
		say "PgBouncer: using LOANQ_TEST_PGBOUNCER_DSN"
		return
	fi
	if [ -z "$(pgbouncer_bin)" ] && may_install; then
		say "PgBouncer: not installed: installing Debian's pgbouncer with apt-get (for the connection-pooler tests)"
		apt_install pgbouncer
	fi
	[ -n "$(pgbouncer_bin)" ] ||
		die "PgBouncer is required by the connection-pooler tests: install it (Debian: apt-get install pgbouncer) or set LOANQ_TEST_PGBOUNCER_DSN to a transaction-mode PgBouncer in front of the test PostgreSQL"
	start_throwaway_pgbouncer || die "PgBouncer: could not start a throwaway pgbouncer (see above)"
}

# may_install: apt-get may install what is missing (root, apt-get present,
# and LOANQ_TEST_INSTALL is not 0).
may_install() { [ "${LOANQ_TEST_INSTALL:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

apt_install() {
	# Debian's maintainer scripts try to start the service; there may be no
	# init system to do it, which is fine: the throwaway server is used.
	# Quiet: apt's and dpkg's progress go to a log, shown only on failure.
	local log=$LOANQ_THROWAWAY_DIR/apt.log
	say "installing $* with apt-get (log: $log)"
	if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } >>"$log" 2>&1; then
		cat "$log" >&2
		say "apt-get install $* failed"
	fi
}

# missing_packages prints the Debian packages the run needs and would
# install, one per line: what no DSN, running server or installed binary
# provides.
missing_packages() {
	if [ -z "${LOANQ_TEST_POSTGRES_DSN:-}" ] && ! pg_accepts 127.0.0.1 "$LOANQ_TEST_PG_PORT" && [ -z "$(pg_bin initdb)" ]; then
		echo postgresql
	fi
	if [ -z "${LOANQ_TEST_MYSQL_DSN:-}" ] && ! mysql_accepts 127.0.0.1 "$LOANQ_TEST_MYSQL_PORT" &&
		{ [ -z "$(mysql_server)" ] || [ -z "$(mysql_installer)" ]; }; then
		echo mariadb-server
	fi
	if [ -z "${LOANQ_TEST_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
		echo chromium
	fi
	command -v nft >/dev/null || echo nftables
	if [ -z "${LOANQ_TEST_PGBOUNCER_DSN:-}" ] && [ -z "$(pgbouncer_bin)" ]; then
		echo pgbouncer
	fi
}

# check_requirements: with LOANQ_TEST_INSTALL=0, fail before anything runs
# when packages are missing, naming every one of them.
check_requirements() {
	[ "${LOANQ_TEST_INSTALL:-1}" = 0 ] || return 0
	local missing
	missing=$(missing_packages | tr '\n' ' ')
	missing=${missing% }
	[ -z "$missing" ] ||
		die "LOANQ_TEST_INSTALL=0 and these packages are missing: $missing (Debian: apt-get install $missing; or set LOANQ_TEST_POSTGRES_DSN, LOANQ_TEST_MYSQL_DSN, LOANQ_TEST_PGBOUNCER_DSN, LOANQ_TEST_CHROMIUM for what runs elsewhere)"
	say "LOANQ_TEST_INSTALL=0: every package the tests need is there"
}

# ------------------------------------------------------------------ Chromium

# The dashboard's browser test (e2e/browser_test.go) drives a headless
# Chromium: LOANQ_TEST_CHROMIUM when set, else chromium on the PATH, else
# Debian's package installed with apt-get when running as root, else the run
# fails saying what to install.
ensure_chromium() {
	if [ -n "${LOANQ_TEST_CHROMIUM:-}" ]; then
		[ -x "$LOANQ_TEST_CHROMIUM" ] || die "Chromium: LOANQ_TEST_CHROMIUM=$LOANQ_TEST_CHROMIUM is not an executable"
		say "Chromium: using $LOANQ_TEST_CHROMIUM"
		return
	fi
	if ! command -v chromium >/dev/null && may_install; then
		say "Chromium: not installed: installing Debian's chromium with apt-get (for the dashboard's browser test)"
		apt_install chromium fonts-dejavu-core
	fi
	command -v chromium >/dev/null ||
		die "Chromium is required by the dashboard's browser test: install it (Debian: apt-get install chromium) or set LOANQ_TEST_CHROMIUM to a Chromium or Chrome binary"
	export LOANQ_TEST_CHROMIUM
	LOANQ_TEST_CHROMIUM=$(command -v chromium)
	say "Chromium: using $LOANQ_TEST_CHROMIUM"
}

# The network fault tests (e2e/fault_network_test.go) drop packets inside a
# network namespace of their own with nftables: nft on the PATH, else Debian's
# package installed with apt-get when running as root, else the run fails
# saying what to install.
ensure_nft() {
	if ! command -v nft >/dev/null && may_install; then
		say "nftables: not installed: installing Debian's nftables with apt-get (for the packet-loss fault test)"
		apt_install nftables
	fi
	command -v nft >/dev/null ||
		die "nftables is required by the packet-loss fault test: install it (Debian: apt-get install nftables)"
	say "nftables: using $(command -v nft)"
}
