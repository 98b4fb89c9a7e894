package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// sources parses the engine's non-test files.
func sources(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	if len(files) == 0 {
		t.Fatal("got no source files of the engine")
	}
	return fset, files
}

// mechanism are the imports outside the standard library the engine may
// have: the two drivers and fault.
var mechanism = []string{
	"modernc.org/sqlite",
	"github.com/jackc/pgx/v5",
	"github.com/tally-analytics/tally/fault",
}

// TestEngineImportsOnlyTheMechanism fails when the engine imports anything
// but the standard library (database/sql among it), the two drivers and
// fault (docs/architecture.md#storages-files): storage, schema or any
// package of the product would make it the product's.
func TestEngineImportsOnlyTheMechanism(t *testing.T) {
	t.Parallel()
	_, files := sources(t)
	for name, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(strings.Split(path, "/")[0], ".") {
				continue // the standard library
			}
			ok := false
			for _, m := range mechanism {
				ok = ok || path == m || strings.HasPrefix(path, m+"/")
			}
			if !ok {
				t.Errorf("%s: got import %q, want only the standard library, %s", name, path, strings.Join(mechanism, ", "))
			}
		}
	}
}

// productWords are what the service stores, which the engine must not name.
var productWords = []string{"event", "site", "partial", "funnel", "quota", "goal", "visit",
	"workspace", "tenant", "rollup", "erase", "gdpr", "ingest", "intake", "dlq", "profile", "trait", "pageview"}

// TestEngineNamesNoProduct fails when an identifier or a string of the
// engine's sources names a thing of the product (an event, a site, a
// partial...): what a table of the service does differently is storage's.
func TestEngineNamesNoProduct(t *testing.T) {
	t.Parallel()
	fset, files := sources(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			var text string
			switch n := n.(type) {
			case *ast.Ident:
				text = n.Name
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				text = n.Value
			default:
				return true
			}
			lower := strings.ToLower(text)
			for _, w := range productWords {
				if strings.Contains(lower, w) {
					t.Errorf("%s: got %s, which names %q, want the engine to name no thing of the product", fset.Position(n.Pos()), text, w)
				}
			}
			return true
		})
	}
}

// maxDialectMethods bounds Dialect: SQL fragments and error classes, not
// what a feature does on each backend.
const maxDialectMethods = 22

// TestDialectStaysSmall fails when Dialect grows past maxDialectMethods.
func TestDialectStaysSmall(t *testing.T) {
	t.Parallel()
	if n := reflect.TypeFor[Dialect]().NumMethod(); n > maxDialectMethods {
		t.Errorf("got Dialect of %d methods, want at most %d: a feature's way on each backend is storage's (its tables interface)", n, maxDialectMethods)
	}
}
