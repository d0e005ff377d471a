package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmePath is the README, from this package's directory.
const readmePath = "../../../README.md"

// imports maps the package names README snippets use to their import
// paths: a snippet names packages, the test imports them.
var imports = map[string]string{
	"core":       "github.com/go-ratelimit/ratelimit/core",
	"keyfunc":    "github.com/go-ratelimit/ratelimit/keyfunc",
	"nethttp":    "github.com/go-ratelimit/ratelimit/nethttp",
	"chimw":      "github.com/go-ratelimit/ratelimit/chimw",
	"ginmw":      "github.com/go-ratelimit/ratelimit/ginmw",
	"echomw":     "github.com/go-ratelimit/ratelimit/echomw",
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

// program turns a snippet into a package main that compiles exactly when the
// snippet does. A snippet that starts with "package" is a program already.
// Any other is the body of main: the packages it names (from imports) are
// imported, and every variable it declares at its top level is used once at
// the end, as a reader's program would go on to use them. Line directives
// make the compiler report errors at the snippet's lines in file.
func program(file string, s snippet) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(s.code), "package ") {
		return []byte(fmt.Sprintf("//line %s:%d\n%s", file, s.line, s.code)), nil
	}
	body := fmt.Sprintf("func main() {\n//line %s:%d\n%s\n}\n", file, s.line, s.code)
	f, err := parser.ParseFile(token.NewFileSet(), "", "package main\n"+body, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: the snippet is not a function body: %w", file, s.line, err)
	}
	var used []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && imports[id.Name] != "" && !slices.Contains(used, id.Name) {
				used = append(used, id.Name)
			}
		}
		return true
	})
	var declared []string
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
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	slices.Sort(used)
	for _, name := range used {
		fmt.Fprintf(&b, "\t%q\n", imports[name])
	}
	b.WriteString(")\n\nfunc main() {\n")
	fmt.Fprintf(&b, "//line %s:%d\n%s", file, s.line, s.code)
	b.WriteString("//line readme_test.go:1\n")
	for _, name := range declared {
		fmt.Fprintf(&b, "\t_ = %s\n", name)
	}
	b.WriteString("}\n")
	return []byte(b.String()), nil
}

// vet writes each program to a directory of its own under a temporary
// directory inside this module (so that the programs import this
// repository's packages and the module's dependencies) and runs go vet on
// them all. It returns go vet's combined output and error.
func vet(t *testing.T, programs [][]byte) (string, error) {
	t.Helper()
	// go test puts its own GOROOT/bin first in the test's PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to compile the snippets with: %v", err)
	}
	// A leading underscore keeps the go command's ./... patterns away.
	dir, err := os.MkdirTemp(".", "_snippets")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	args := []string{"vet"}
	for i, p := range programs {
		sub := filepath.Join(dir, fmt.Sprintf("s%02d", i+1))
		require.NoError(t, os.Mkdir(sub, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sub, "main.go"), p, 0o644))
		args = append(args, "./"+filepath.ToSlash(sub))
	}
	out, err := exec.Command(goTool, args...).CombinedOutput()
	return string(out), err
}

// TestREADMESnippetsCompile compiles every Go snippet of README.md, so that a
// change of the API that the README does not follow fails here, at the
// README's line.
func TestREADMESnippetsCompile(t *testing.T) {
	md, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	all := snippets(md)
	require.NotEmpty(t, all, "README.md has no ```go blocks")
	var programs [][]byte
	for _, s := range all {
		p, err := program("README.md", s)
		require.NoError(t, err)
		programs = append(programs, p)
	}
	out, err := vet(t, programs)
	assert.NoError(t, err, "a README snippet does not compile:\n%s", out)
}

// TestSnippetCheckCatchesDrift makes sure the check above can fail: a snippet
// that calls what the API does not have is reported at its line.
func TestSnippetCheckCatchesDrift(t *testing.T) {
	md := []byte("# Title\n\n```go\nlim := core.MustNew(core.FixedWindow(1, time.Second))\nmw, err := nethttp.Middleware(lim)\n```\n")
	all := snippets(md)
	require.Len(t, all, 1)
	p, err := program("DRIFT.md", all[0])
	require.NoError(t, err)
	_, err = format.Source(p)
	require.NoError(t, err, "the wrapped program is valid Go:\n%s", p)
	out, err := vet(t, [][]byte{p})
	require.Error(t, err)
	assert.Contains(t, out, "DRIFT.md:5:")
	assert.Contains(t, out, "assignment mismatch")
}
