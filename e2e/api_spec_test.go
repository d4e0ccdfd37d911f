package e2e

import (
	"net/http"
	"os"
	"sync"

	"github.com/loanq/loanq/internal/apispec"
)

// apiSpec is commands/openapi.json, the document serve --api serves at
// /api/v1/openapi.json, loaded once.
var apiSpec = sync.OnceValues(func() (*apispec.Doc, error) {
	b, err := os.ReadFile("../commands/openapi.json")
	if err != nil {
		return nil, err
	}
	return apispec.Load(b)
})

// checkSpec says how an answer to method path is not one the OpenAPI
// document allows (an undocumented status, another Content-Type, a body
// outside the schema); nil when it is.
func checkSpec(method, path string, status int, header http.Header, body []byte) error {
	doc, err := apiSpec()
	if err != nil {
		return err
	}
	return doc.Check(method, path, status, header, body)
}
