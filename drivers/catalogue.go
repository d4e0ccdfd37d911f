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
// them: that hides the SQL where an override shows it. (Named locks' ON
// CONFLICT alone could have been a vocabulary word; one way for every
// feature keeps one place to look.) An override naming
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

// Named is one statement with its purpose.
type Named struct {
	Field   string
	Purpose string
	SQL     string
	// Empty says which capability decides that a dialect does not send the
	// statement ("" when every dialect sends it; Capabilities.CapabilityStatements).
	Empty string
}

// statement is what every Stmt[P] and Query[P, R] is, whatever its types.
type statement interface {
	Text() string
	compile(d Dialect, name string) error
}

// eachStmt calls f for every field of the struct cat points to, in
// declaration order; every field must be a Stmt[P] or a Query[P, R].
func eachStmt(cat any, f func(field reflect.StructField, st statement) error) error {
	v := reflect.ValueOf(cat)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("statement catalogue %T is not a pointer to a struct", cat)
	}
	v = v.Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		st, ok := v.Field(i).Addr().Interface().(statement)
		if !ok {
			return fmt.Errorf("field %s of statement catalogue %s is not a drivers.Stmt or drivers.Query", t.Field(i).Name, t)
		}
		if err := f(t.Field(i), st); err != nil {
			return err
		}
	}
	return nil
}

// ListCatalogue is List for any statement catalogue (see CompileCatalogue).
func ListCatalogue(cat any) []Named {
	var out []Named
	_ = eachStmt(cat, func(f reflect.StructField, st statement) error {
		out = append(out, Named{Field: f.Name, Purpose: f.Tag.Get("purpose"), SQL: strings.TrimSpace(st.Text()),
			Empty: f.Tag.Get("empty")})
		return nil
	})
	return out
}

// CompileCatalogue compiles a statement catalogue other than Statements for
// d, exactly as Build compiles Statements: cat points to a struct whose
// fields are all Stmt[P] or Query[P, R] with `purpose` (and optional
// `empty`) tags. A bind without a field of P, a field of P never bound, a
// Query whose columns are not R's, or an empty statement without an `empty`
// tag is an error. A feature's Catalogue is compiled through it; bench/,
// with its own tables and its own overrides (bench/dialects.go), calls it
// itself.
func CompileCatalogue(d Dialect, cat any) error {
	var missing []string
	err := eachStmt(cat, func(f reflect.StructField, st statement) error {
		if err := st.compile(d, f.Name); err != nil {
			return err
		}
		if st.Text() == "" && f.Tag.Get("empty") == "" {
			missing = append(missing, f.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("statements missing: %s", strings.Join(missing, ", "))
	}
	return nil
}
