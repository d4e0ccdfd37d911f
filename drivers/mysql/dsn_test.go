package mysql

import (
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/problem"
)

// go-sql-driver/mysql's own options configure the client; only the other
// parameters become session variables (?tls=true once sent SET tls = true).
func TestConfigDriverOptions(t *testing.T) {
	d, err := (&Driver{}).ParseDSN("mariadb://root:p@db.example:3306/loans?tls=skip-verify&timeout=3s&readTimeout=4s&writeTimeout=5s&innodb_lock_wait_timeout=7")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Config(d)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || !cfg.TLS.InsecureSkipVerify || cfg.TLSConfig != "skip-verify" {
		t.Errorf("tls=skip-verify did not reach the driver: TLS %v, TLSConfig %q", cfg.TLS, cfg.TLSConfig)
	}
	if cfg.Timeout != 3*time.Second || cfg.ReadTimeout != 4*time.Second || cfg.WriteTimeout != 5*time.Second {
		t.Errorf("timeouts %v %v %v, want 3s 4s 5s", cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout)
	}
	for _, opt := range []string{"tls", "timeout", "readTimeout", "writeTimeout"} {
		if _, ok := cfg.Params[opt]; ok {
			t.Errorf("driver option %s is also sent as a session variable", opt)
		}
	}
	if cfg.Params["innodb_lock_wait_timeout"] != "7" || cfg.Params["time_zone"] != "'+00:00'" {
		t.Errorf("session variables %v", cfg.Params)
	}
	if cfg.User != "root" || cfg.Passwd != "p" || cfg.Addr != "db.example:3306" || cfg.DBName != "loans" || !cfg.ParseTime || cfg.Loc != time.UTC {
		t.Errorf("config %+v", cfg)
	}

	d, err = (&Driver{}).ParseDSN("mysql://root@db.example:3306/loans?tls=true")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := Config(d); cfg.TLS == nil || cfg.TLS.ServerName != "db.example" || cfg.TLS.InsecureSkipVerify {
		t.Errorf("tls=true: TLS %+v, want verification of db.example", cfg.TLS)
	}
	if _, err := (&Driver{}).ParseDSN("mysql://root@db.example:3306/loans?tls=bogus"); err == nil {
		t.Error("tls=bogus accepted")
	}
}

// Binds travel inside the statement (one round trip, not a prepare and an
// execute) unless the DSN turns it off or names a character set, for which
// the driver's escaping might not be safe.
func TestConfigInterpolatesBinds(t *testing.T) {
	for query, want := range map[string]bool{
		"":                                    true,
		"?interpolateParams=false":            false,
		"?interpolateParams=true":             true,
		"?charset=utf8mb4":                    false,
		"?collation=utf8mb4_general_ci":       false,
		"?innodb_lock_wait_timeout=5":         true,
		"?charset=gbk&interpolateParams=true": true, // refused by the driver when it connects
	} {
		d, err := (&Driver{}).ParseDSN("mysql://root@db.example:3306/loans" + query)
		if err != nil {
			t.Fatalf("%q: %v", query, err)
		}
		cfg, err := Config(d)
		if err != nil {
			t.Fatalf("%q: %v", query, err)
		}
		if cfg.InterpolateParams != want {
			t.Errorf("%q: interpolateParams %v, want %v", query, cfg.InterpolateParams, want)
		}
	}
}

// multiStatements (one string, several statements) and allowAllFiles (the
// server reads any local file through LOAD DATA LOCAL INFILE) are refused as
// bad input, in every spelling the driver reads as on, with the reason and
// without the password; off, they are harmless and accepted.
func TestConfigRefusesDangerousOptions(t *testing.T) {
	for query, says := range map[string]string{
		"?multiStatements=true":                       "multiStatements is refused",
		"?multiStatements=1":                          "multiStatements is refused",
		"?multiStatements=True&tls=false":             "several statements",
		"?multiStatements=false&multiStatements=TRUE": "multiStatements is refused",
		"?allowAllFiles=true":                         "allowAllFiles is refused",
		"?allowAllFiles=1":                            "LOAD DATA LOCAL INFILE",
		"?allowAllFiles=TRUE&multiStatements=0":       "allowAllFiles is refused",
		"?interpolateParams=false&allowAllFiles=true": "allowAllFiles is refused",
	} {
		for _, scheme := range []string{"mysql", "mariadb"} {
			_, err := (&Driver{}).ParseDSN(scheme + "://root:Pw_s3cret@db.example:3306/loans" + query)
			if err == nil || problem.KindOf(err) != problem.Usage || !strings.Contains(err.Error(), says) {
				t.Errorf("%s%s: %v; want bad input saying %q", scheme, query, err, says)
			} else if strings.Contains(err.Error(), "Pw_s3cret") {
				t.Errorf("%s%s: the message shows the password: %v", scheme, query, err)
			}
		}
	}
	for _, query := range []string{"?multiStatements=false", "?allowAllFiles=0", "?multiStatements=0&allowAllFiles=False"} {
		if _, err := (&Driver{}).ParseDSN("mysql://root@db.example:3306/loans" + query); err != nil {
			t.Errorf("%s: %v", query, err)
		}
	}
}
