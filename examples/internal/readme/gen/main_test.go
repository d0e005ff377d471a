package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSnippetsAreCurrent fails when README.md changed and snippets.go was
// not generated again, so that the build compiles what the README shows.
func TestSnippetsAreCurrent(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", readmePath))
	require.NoError(t, err)
	want, err := generate("README.md", md)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", outPath))
	require.NoError(t, err)
	if string(got) != string(want) {
		t.Errorf("examples/internal/readme/%s is not README.md's: run go generate ./examples/internal/readme", outPath)
	}
}

// TestEveryGoBlockIsAFunction: every ```go block, and only those, becomes
// a function whose line directive names the block's first line of code.
func TestEveryGoBlockIsAFunction(t *testing.T) {
	md := "# T\n\n```go\nx := time.Second\n```\n\n```sh\necho shell\n```\n\n```\nplain\n```\n\n  ```go\nvar d time.Duration\nfmt.Println(d)\n  ```\n"
	src, err := generate("T.md", []byte(md))
	require.NoError(t, err)
	s := string(src)
	assert.Equal(t, 2, strings.Count(s, "\nfunc snippet"), "%s", s)
	assert.Contains(t, s, "func snippet1() {\n//line T.md:4\n\tx := time.Second\n")
	assert.Contains(t, s, "func snippet2() {\n//line T.md:16\n\tvar d time.Duration\n\tfmt.Println(d)\n")
	assert.Contains(t, s, "\t_ = x\n", "a variable the snippet declares is used")
	assert.Contains(t, s, "\t\"fmt\"\n\t\"time\"\n", "the packages the snippets name are imported")
	assert.NotContains(t, s, "echo shell")
	assert.NotContains(t, s, "plain")

	_, err = generate("T.md", []byte("# T\n\n```go\nfunc (\n```\n"))
	assert.ErrorContains(t, err, "T.md:4: the snippet is not the body of a function")
	_, err = generate("T.md", []byte("# T\n"))
	assert.ErrorContains(t, err, "T.md has no ```go blocks")
}

// TestSnippetCheckCatchesDrift makes sure the check can fail: a snippet
// that calls what the API does not have fails go vet at its line.
func TestSnippetCheckCatchesDrift(t *testing.T) {
	// go test puts its own GOROOT/bin first in the test's PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to compile the snippets with: %v", err)
	}
	md := "# Title\n\n```go\nlim := core.MustNew(core.FixedWindow(1, time.Second))\nmw, err := nethttp.Middleware(lim)\n```\n"
	src, err := generate("DRIFT.md", []byte(md))
	require.NoError(t, err)
	// Inside this module, so that the package imports this repository's;
	// a leading underscore keeps the go command's ./... patterns away.
	dir, err := os.MkdirTemp(".", "_drift")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, outPath), src, 0o644))
	args := append(append([]string{"vet"}, raceFlags...), "./"+filepath.ToSlash(dir))
	out, err := exec.Command(goTool, args...).CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "DRIFT.md:5:")
	assert.Contains(t, string(out), "assignment mismatch")
}
