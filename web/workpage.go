package web

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
)

// The processor's page of `loanq serve --api` (/work, docs/api.md): pick a
// task, ask for N loans, see "looking…" while the request is pending (the
// page long-polls GET /api/v1/requests/ID), the pipeline with Complete /
// Return after… / Never, and the day's history. Its sign-in, sign-out and
// sessions are in auth_session.go.

type workPage struct {
	a     *api
	pages *template.Template
	// methods are the page's routes, for a 405's Allow.
	methods *methodSet
}

func newWorkPage(a *api) (*workPage, error) {
	t, err := template.ParseFS(assets, "assets/work/*.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the work page templates: %w", err)
	}
	return &workPage{a: a, pages: t}, nil
}

// page is GET /work: the page for a live session; without one, under
// --auth proxy a session for the user the proxy names, else the sign-in
// form.
func (wp *workPage) page(w http.ResponseWriter, r *http.Request) {
	s, err := wp.a.session(r)
	if err != nil {
		wp.a.fail(w, err)
		return
	}
	if s == nil && wp.a.proxy != nil {
		p, why := wp.a.proxy.principal(r)
		if p == nil {
			w.WriteHeader(http.StatusUnauthorized)
			wp.render(w, "login.html", map[string]any{"Proxy": true, "Why": why})
			return
		}
		if err := wp.a.proxy.keepGroups(r, p.User); err != nil { // --proxy-groups-header
			wp.a.fail(w, err)
			return
		}
		if s, err = wp.a.openSession(w, r, p); err != nil {
			wp.a.fail(w, err)
			return
		}
	}
	if s == nil {
		csrf, err := loginForm(w, r)
		if err != nil {
			wp.a.fail(w, err)
			return
		}
		wp.render(w, "login.html", map[string]any{"CSRF": csrf})
		return
	}
	wp.render(w, "work.html", map[string]any{"User": s.User, "Role": s.Role, "CSRF": s.CSRF, "Supervisor": s.Supervisor()})
}

func (wp *workPage) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := wp.pages.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(w, "\n<!-- template error: %s -->", template.HTMLEscapeString(err.Error()))
	}
}

// static serves the page's script and style (GET /work/assets/), not its
// templates.
func (wp *workPage) static() http.Handler {
	files := http.StripPrefix("/work/assets/", http.FileServerFS(assetDir("work")))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".js") && !strings.HasSuffix(r.URL.Path, ".css") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// notFound answers anything else under /work/: a route of the page with
// another method is 405 with Allow, any other path 404.
func (wp *workPage) notFound(w http.ResponseWriter, r *http.Request) {
	if allow := wp.methods.allow(r); allow != "" {
		w.Header().Set("Allow", allow)
		http.Error(w, "405 method not allowed: "+r.URL.Path+" answers "+allow, http.StatusMethodNotAllowed)
		return
	}
	http.Error(w, "404 not found: the processor's page is /work", http.StatusNotFound)
}
