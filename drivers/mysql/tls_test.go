package mysql_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/throwaway"
	"github.com/loanq/loanq/problem"
)

// ?tls=… reaches go-sql-driver/mysql's configuration (it was once sent as
// SET tls = true): a throwaway MariaDB with a self-signed certificate made
// here, and an account that requires TLS, accepts the DSN with ?tls=skip-verify
// and refuses it without; the session's cipher shows the connection is
// encrypted. (The shared test server cannot be given TLS without a restart.)
func TestTLSConnection(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cert, key := selfSigned(t, dir)
	srv := throwaway.MariaDBWith(t, "--ssl-cert="+cert, "--ssl-key="+key)
	ctx := context.Background()

	_, admin, _, err := drivers.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"CREATE USER 'tls_only'@'%' IDENTIFIED BY 'Tl5 p@ss:w&rd' REQUIRE SSL",
		"GRANT ALL ON loanq.* TO 'tls_only'@'%'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	base := strings.Replace(srv.DSN, "root:@", "tls_only:Tl5 p@ss:w&rd@", 1)

	_, db, _, err := drivers.Connect(ctx, base+"?tls=skip-verify")
	if err != nil {
		t.Fatalf("?tls=skip-verify: %v", err)
	}
	defer db.Close()
	var name, cipher string
	if err := db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
		t.Fatal(err)
	}
	if cipher == "" {
		t.Error("connected with ?tls=skip-verify but the session has no TLS cipher")
	}

	_, _, _, err = drivers.Connect(ctx, base+"?tls=false")
	if err == nil || problem.KindOf(err) != problem.Usage || !strings.Contains(err.Error(), "1045") {
		t.Errorf("?tls=false to an account that requires TLS: want access denied (bad input), got %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "ss:w") {
		t.Errorf("the error shows a piece of the password: %v", err)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
