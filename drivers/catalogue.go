package drivers

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// Statements is the engine's contract. Every other feature that keeps rows
// in loanq's tables — `lock run`'s named locks, the dashboard, prune, the
// audit, task stats and work list, a task's history (report, task delete),
// API tokens, the processor page's sessions — declares a Catalogue of its
// own beside the code that reads it: a struct of Stmt[P] and Query[P, R]
// fields with `purpose` tags, its portable text, and its parameter and row
// types, all in the feature's package. A catalogue is compiled and checked
// for a dialect exactly as Build compiles Statements (a bind without a
// parameter field, a field never bound, a select list that is not the row
// type's columns in order, an empty statement: each is an error), at its
// first use on that dialect, and `loanq sql` prints it after the engine's
// statements (Catalogues).
//
// Where a dialect says a feature's statement its own way, the text is the
// driver's: Driver.CatalogueSQL returns it by catalogue name and field, and
// it lives in drivers/<db>/sql.go beside the engine's overrides. The
// features' differences are access paths chosen for each dialect's indexes
// and locks (MySQL has no partial index, so the dashboard reaches active
// work through (task_id, active_loan_id); MariaDB does not turn a DELETE …
// IN (JSON_TABLE) into a join, so prune forces one; Oracle has no INSERT …
// ON CONFLICT), which belong with the migrations that create those indexes
// and with the rest of what the dialect says differently, not in the
// features, which stay free of dialect names. A template function of the
// vocabulary (Dialect) would have had to produce whole FROM clauses for
// them: that hides the SQL where an override shows it. An override naming
// a field its catalogue lacks fails the catalogue's build; one naming a
// catalogue nothing declares fails TestCatalogues (commands/).

// Overrides are what a dialect says its own way in the feature catalogues:
// catalogue name → statement field → the dialect's text, written as the
// portable text is (template calls of the vocabulary, :name binds) and
// checked the same way.
type Overrides map[string]map[string]string

// Catalogue is a feature's statement catalogue, S its struct of statements
// (the comment at the top of drivers/catalogue.go). Declare one per feature
// with NewCatalogue, as a package variable; For compiles it for a driver.
type Catalogue[S any] struct {
	name     string
	portable func() *S
	built    sync.Map // driver name → *S
	mu       sync.Mutex
}

// Listing is a catalogue whatever its statement type: what `loanq sql` and
// the checks of every statement a dialect sends need of it.
type Listing interface {
	// Name is the catalogue's name, its key in Overrides.
	Name() string
	// Compiled is the catalogue compiled for d (a pointer to its struct of
	// statements, for ListCatalogue), or why it cannot be.
	Compiled(d Driver) (any, error)
}

var declared struct {
	sync.Mutex
	list []Listing
}

// NewCatalogue declares a feature's catalogue: name is its key in the
// drivers' Overrides, portable returns its statements as every database
// says them (a new value at each call). Nothing is compiled before the
// catalogue's first use on a dialect: declaring costs no start-up time. Two
// catalogues of one name panic (a programming error).
func NewCatalogue[S any](name string, portable func() *S) *Catalogue[S] {
	c := &Catalogue[S]{name: name, portable: portable}
	declared.Lock()
	defer declared.Unlock()
	for _, l := range declared.list {
		if l.Name() == name {
			panic("drivers: two statement catalogues named " + name)
		}
	}
	declared.list = append(declared.list, c)
	return c
}

// Catalogues lists the declared catalogues by name: those of the packages
// linked into this binary (every one, in loanq; a test sees those of the
// packages it imports).
func Catalogues() []Listing {
	declared.Lock()
	defer declared.Unlock()
	out := append([]Listing(nil), declared.list...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Name is the catalogue's name.
func (c *Catalogue[S]) Name() string { return c.name }

// For returns the catalogue compiled for d, built at its first use on d's
// dialect and the same one after. It panics when the catalogue cannot be
// built, as Build does: a programming error, met by every test that runs
// the feature on that dialect, and on all four by TestCatalogues
// (commands/) and the golden tests.
func (c *Catalogue[S]) For(d Driver) *S {
	s, err := c.build(d)
	if err != nil {
		panic("drivers: " + err.Error())
	}
	return s
}

// Compiled is For, with the error instead of a panic.
func (c *Catalogue[S]) Compiled(d Driver) (any, error) { return c.build(d) }

func (c *Catalogue[S]) build(d Driver) (*S, error) {
	if s, ok := c.built.Load(d.Name()); ok {
		return s.(*S), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.built.Load(d.Name()); ok {
		return s.(*S), nil
	}
	s := c.portable()
	if err := override(s, d.CatalogueSQL()[c.name]); err != nil {
		return nil, fmt.Errorf("statement catalogue %s for %s: %w", c.name, d.Name(), err)
	}
	if err := compileFeature(d.Dialect(), s); err != nil {
		return nil, fmt.Errorf("statement catalogue %s for %s: %w", c.name, d.Name(), err)
	}
	c.built.Store(d.Name(), s)
	return s, nil
}

// override sets the text of the fields of the catalogue cat points to that
// texts names; a name that is no field of it is an error.
func override(cat any, texts map[string]string) error {
	v := reflect.ValueOf(cat).Elem()
	for field, text := range texts {
		f := v.FieldByName(field)
		if !f.IsValid() {
			return fmt.Errorf("the dialect overrides %s, which the catalogue does not have", field)
		}
		sql := f.FieldByName("SQL")
		if !sql.IsValid() || sql.Kind() != reflect.String {
			return fmt.Errorf("field %s is not a drivers.Stmt or drivers.Query", field)
		}
		sql.SetString(text)
	}
	return nil
}

// compileFeature is CompileCatalogue, and every read a Query: a feature
// reads no statement's rows but through its row type.
func compileFeature(d Dialect, cat any) error {
	if err := CompileCatalogue(d, cat); err != nil {
		return err
	}
	return eachStmt(cat, func(f reflect.StructField, st statement) error {
		if _, typed := st.(interface{ queryColumns() }); typed {
			return nil
		}
		verb := strings.ToUpper(strings.Fields(st.Text() + " x")[0])
		if verb == "SELECT" || verb == "WITH" {
			return fmt.Errorf("statement %s returns rows but is a drivers.Stmt, not a drivers.Query with a row type", f.Name)
		}
		return nil
	})
}
