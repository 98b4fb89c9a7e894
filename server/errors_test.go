package server

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tally-analytics/tally/storage"
)

func TestWriteError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{"full write queue", storage.ErrQueueFull, 503, "unavailable", "1"},
		{"shutting down", storage.ErrClosed, 503, "unavailable", "1"},
		{"internal errors are generic", errors.New("disk I/O error at /secret/path"), 500, "internal", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeError(discardLogger(), rec, httptest.NewRequest("GET", "/", nil), "/", tt.err)
			r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			mustStatus(t, r, tt.status, tt.code)
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("got Retry-After %q, want %q", got, tt.retryAfter)
			}
			if strings.Contains(rec.Body.String(), "/secret/path") {
				t.Errorf("internal detail leaked: %s", rec.Body)
			}
		})
	}
}

// TestEveryFaultCodeHasAStatus guards statusOf against a code added to
// package fault without a status, which would answer that error with a 500:
// it reads every string constant declared in fault/fault.go.
func TestEveryFaultCodeHasAStatus(t *testing.T) {
	t.Parallel()
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
