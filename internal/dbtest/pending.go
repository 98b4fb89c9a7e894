package dbtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// CheckPending fails t unless every test named in the package's pending
// list (PendingFile) is a top-level test of the package: the list names
// what is left to port, not what was renamed or deleted meanwhile.
func CheckPending(t *testing.T) {
	t.Helper()
	problems, err := pendingProblems(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// pendingProblems lists the names of dir's pending list that are not
// tests of the package in dir.
func pendingProblems(dir string) ([]string, error) {
	pending, err := ReadPending(filepath.Join(dir, PendingFile))
	if err != nil {
		return nil, err
	}
	tests, err := packageTests(dir)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, name := range pending {
		if !tests[name] {
			problems = append(problems, fmt.Sprintf("%s names %s: got no such test in the package, want the list to name existing tests", PendingFile, name))
		}
	}
	return problems, nil
}

// packageTests returns the names of the top-level test and fuzz functions declared
// in dir's _test.go files.
func packageTests(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	tests := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && (strings.HasPrefix(fn.Name.Name, "Test") || strings.HasPrefix(fn.Name.Name, "Fuzz")) && fn.Name.Name != "TestMain" {
				tests[fn.Name.Name] = true
			}
		}
	}
	return tests, nil
}
