package mysql

import (
	"testing"
	"time"
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
