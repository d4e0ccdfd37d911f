package web

import (
	"net/http/httptest"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"": false, "gzip": true, "gzip, deflate, br": true, "br;q=1.0, gzip;q=0.8": true, "*": true,
		"gzip;q=0": false, "gzip; q=0.0": false, "identity": false, "deflate, gzip;q=0.001": true,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", header)
		if got := acceptsGzip(r); got != want {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", header, got, want)
		}
	}
}
