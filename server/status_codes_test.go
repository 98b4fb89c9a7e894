package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestEveryFaultCodeHasAStatus guards statusOf against a code added to
// package fault without a status, which would answer that error with a 500:
// it reads every string constant declared in fault/fault.go.
func TestEveryFaultCodeHasAStatus(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "../fault/fault.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{} // value → constant name
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes[code] = vs.Names[i].Name
			}
		}
	}
	if len(codes) < 30 {
		t.Fatalf("got %d codes from fault/fault.go, want every one of them (did the file move?)", len(codes))
	}
	for code, name := range codes {
		if _, ok := statusOf[code]; !ok {
			t.Errorf("fault.%s (%q) has no status in statusOf", name, code)
		}
	}
	for code := range statusOf {
		if _, ok := codes[code]; !ok {
			t.Errorf("statusOf maps %q, which fault/fault.go does not declare", code)
		}
	}
}
