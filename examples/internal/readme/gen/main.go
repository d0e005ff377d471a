// Command gen writes snippets.go, the package readme that compiles every Go
// snippet of the repository's README.md: each ```go block becomes the body
// of a function, with line directives, so that a README that drifts from
// the API fails the build at the README's line. Run it with go generate in
// examples/internal/readme; its test fails when snippets.go is not current.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"log"
	"os"
	"slices"
	"strings"
)

// imports maps the package names README snippets use to their import
// paths: a snippet names packages, the generated file imports them.
var imports = map[string]string{
	"core":       "github.com/go-ratelimit/ratelimit/core",
	"keyfunc":    "github.com/go-ratelimit/ratelimit/keyfunc",
	"nethttp":    "github.com/go-ratelimit/ratelimit/nethttp",
	"chimw":      "github.com/go-ratelimit/ratelimit/chimw",
	"ginmw":      "github.com/go-ratelimit/ratelimit/ginmw",
	"echomw":     "github.com/go-ratelimit/ratelimit/echomw",
	"grpcmw":     "github.com/go-ratelimit/ratelimit/grpcmw",
	"redisstore": "github.com/go-ratelimit/ratelimit/redisstore",
	"promhook":   "github.com/go-ratelimit/ratelimit/promhook",
	"otelhook":   "github.com/go-ratelimit/ratelimit/otelhook",
	"sloghook":   "github.com/go-ratelimit/ratelimit/nethttp/sloghook",
	"slog":       "log/slog",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
	"chi":        "github.com/go-chi/chi/v5",
	"gin":        "github.com/gin-gonic/gin",
	"echo":       "github.com/labstack/echo/v4",
	"grpc":       "google.golang.org/grpc",
	"redis":      "github.com/redis/go-redis/v9",
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"log":        "log",
	"os":         "os",
	"strings":    "strings",
	"time":       "time",
}

// Paths from examples/internal/readme, where go generate runs.
const (
	readmePath = "../../../README.md"
	outPath    = "snippets.go"
)

func main() {
	log.SetFlags(0)
	md, err := os.ReadFile(readmePath)
	if err != nil {
		log.Fatal(err)
	}
	src, err := generate("README.md", md)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(outPath, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// snippet is one ```go block of a Markdown file.
type snippet struct {
	line int // of the first line of code, 1-based
	code string
}

// snippets returns the ```go blocks of the Markdown text md.
func snippets(md []byte) []snippet {
	var out []snippet
	var cur *snippet
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{line: n + 1}
			b.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return out
}

// body reads a snippet as the body of a function: the packages it names
// (keys of imports) and the variables it declares at its top level, which
// the function uses once at the end, as a reader's program would go on to
// use them.
func body(file string, s snippet) (used, declared []string, err error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc f() {\n"+s.code+"\n}\n", parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, fmt.Errorf("%s:%d: the snippet is not the body of a function (a whole program is not supported): %w", file, s.line, err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && imports[id.Name] != "" && !slices.Contains(used, id.Name) {
				used = append(used, id.Name)
			}
		}
		return true
	})
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		var names []*ast.Ident
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, e := range st.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						names = append(names, id)
					}
				}
			}
		case *ast.DeclStmt:
			if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, sp := range gd.Specs {
					names = append(names, sp.(*ast.ValueSpec).Names...)
				}
			}
		}
		for _, id := range names {
			if id.Name != "_" && !slices.Contains(declared, id.Name) {
				declared = append(declared, id.Name)
			}
		}
	}
	return used, declared, nil
}

// generate returns the package readme holding every Go snippet of the
// Markdown text md, named file in line directives: one function per
// snippet, in order, which compiles exactly when the snippet does as the
// body of a function, and reports errors at the snippet's lines in file.
func generate(file string, md []byte) ([]byte, error) {
	all := snippets(md)
	if len(all) == 0 {
		return nil, fmt.Errorf("%s has no ```go blocks", file)
	}
	var used []string
	var funcs, names strings.Builder
	for i, s := range all {
		u, declared, err := body(file, s)
		if err != nil {
			return nil, err
		}
		for _, name := range u {
			if !slices.Contains(used, name) {
				used = append(used, name)
			}
		}
		name := fmt.Sprintf("snippet%d", i+1)
		fmt.Fprintf(&names, "\t%s,\n", name)
		fmt.Fprintf(&funcs, "\nfunc %s() {\n//line %s:%d\n%s", name, file, s.line, s.code)
		// Back to this file's own lines (numbered below, once formatted).
		funcs.WriteString("//line " + outPath + ":1\n")
		for _, d := range declared {
			fmt.Fprintf(&funcs, "_ = %s\n", d)
		}
		funcs.WriteString("}\n")
	}
	// The standard library first, then the others, as goimports groups them.
	var std, others []string
	for _, name := range used {
		if p := imports[name]; strings.Contains(strings.Split(p, "/")[0], ".") {
			others = append(others, p)
		} else {
			std = append(std, p)
		}
	}
	slices.Sort(std)
	slices.Sort(others)
	var b strings.Builder
	fmt.Fprintf(&b, "// Code generated by go run ./gen from %s; DO NOT EDIT.\n\npackage readme\n\nimport (\n", file)
	for _, p := range std {
		fmt.Fprintf(&b, "%q\n", p)
	}
	b.WriteString("\n")
	for _, p := range others {
		fmt.Fprintf(&b, "%q\n", p)
	}
	fmt.Fprintf(&b, ")\n\n// The snippets of %s, in order.\nvar _ = []func(){\n%s}\n%s", file, names.String(), funcs.String())
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("%s: the generated file is not valid Go: %w", file, err)
	}
	// Number the directives that return to this file: each names the line
	// after it.
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "//line "+outPath+":") {
			lines[i] = fmt.Sprintf("//line %s:%d", outPath, i+2)
		}
	}
	return []byte(strings.Join(lines, "\n")), nil
}
