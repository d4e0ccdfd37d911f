package commands

import "testing"

// --trusted-proxy takes addresses and networks, comma-separated; anything
// else is refused; --user-header is read in its canonical form.
// (web's TestAPIProxyAuth: what serve then does with them.)
func TestServeProxyFlags(t *testing.T) {
	for _, c := range [][]string{{""}, {"nonsense"}, {"10.0.0.0/99"}} {
		if _, err := parseProxyAuth(c, "X-Forwarded-User", "", "g"); err == nil {
			t.Errorf("--trusted-proxy %q accepted", c)
		}
	}
	if pa, err := parseProxyAuth([]string{"10.0.0.5, ::1"}, "x-user", "", "g"); err != nil || len(pa.Trusted) != 2 || pa.UserHeader != "X-User" {
		t.Errorf("single addresses: %+v %v", pa, err)
	}
}
