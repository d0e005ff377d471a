package nethttp_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestGoDocListsEveryConstant: go doc shows a type's constants one line
// per declaration, and a grouped declaration as its first constant and
// "...", so each HeaderStyle and Outcome is declared on its own.
func TestGoDocListsEveryConstant(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/go-ratelimit/ratelimit/nethttp")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"HeaderStyle": 4, "Outcome": 9}
	for _, typ := range pkg.Types {
		n, ok := want[typ.Name]
		if !ok {
			continue
		}
		delete(want, typ.Name)
		if got := len(typ.Consts); got != n {
			t.Errorf("%s: got %d constant declarations, want %d, one per constant", typ.Name, got, n)
		}
		for _, c := range typ.Consts {
			if len(c.Names) != 1 || c.Doc == "" {
				t.Errorf("%s: constants %v: want one per declaration, with its doc comment", typ.Name, c.Names)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("types not found: %v", want)
	}
}
