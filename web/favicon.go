package web

import (
	_ "embed"
	"net/http"
)

// favicon.ico is loanq's icon (a 32×32 PNG in an ICO container): browsers
// ask for /favicon.ico on every page, and a 404 there is noise in every
// access log. Public: it says nothing about the server.
//
//go:embed assets/favicon.ico
var faviconICO []byte

func favicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(faviconICO)
}
