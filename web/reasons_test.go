package web

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The dashboard's task page shows the task's reason codes, its max hold,
// and each disposition's reason and note, escaped (docs/reasons.md).
func TestTaskPageReasonsEscaped(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		src := seeded(t, dsn)
		ctx := context.Background()
		if _, _, err := src.Admin.CreateTask(ctx, dispatch.TaskSpec{Name: "rs", Where: "eligible = 1", CreatedBy: "t", MaxHold: 72 * time.Hour,
			Reasons: dispatch.Reasons{Codes: map[string][]string{"never": {"duplicate", "fraud"}}, Required: []string{"never"}}}); err != nil {
			t.Fatal(err)
		}
		r, err := dispatch.New(src.DB, src.Driver).Get(ctx, "rs", "ana", 1, dispatch.GetOptions{})
		if err != nil || len(r.Loans) != 1 {
			t.Fatalf("get: %+v, %v", r, err)
		}
		note := `<script>alert("x")</script> & more`
		if _, err := dispatch.New(src.DB, src.Driver).DisposeNoted(ctx, "rs", r.Loans[0].String(), "ana", "never", 0, false, dispatch.DispositionNote{Reason: "fraud", Note: note}); err != nil {
			t.Fatal(err)
		}
		h, err := Handler(Config{Figures: src})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/tasks/rs", nil)
		req.Host = "127.0.0.1:8080"
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		for _, want := range []string{"never=duplicate,fraud", "required for never", ">fraud<", "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more", "3d0h"} {
			if !strings.Contains(body, want) {
				t.Errorf("GET /tasks/rs lacks %q", want)
			}
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("GET /tasks/rs shows the note unescaped")
		}
	})
}
