package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// write creates the files of a repository under a temporary root.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheck(t *testing.T) {
	root := write(t, map[string]string{
		"README.md": "# Title\n\n## Many servers\n\n" +
			"See [the design](docs/design.md#the-redis-store) and [gone](docs/gone.md), [bad anchor](CONTRIBUTING.md#nowhere),\n" +
			"[here](#many-servers), [there](#nowhere), [a site](https://example.com/x.md).\n" +
			"Code: `core/doc.go`, `core/gone.go`, `./core`, `test.sh`, `gone.sh`, `core.New`, `github.com/x/y`,\n" +
			"`chimw/vX.Y.Z`, `…/chimw`, `/api/users/{id}`, `go run ./examples/demo`.\n" +
			"```sh\ngo run ./examples/demo\ngo run ./examples/gone\ngo test -c -o x.test ./core && ./core.test\n```\n" +
			"```go\nr.Get(\"/items/{id}\", h) // `core/gone.go` in code is not prose\n```\n",
		"CONTRIBUTING.md":      "# Contributing\n",
		"docs/design.md":       "# Design\n\n## The Redis store\n\nSee [the README](../README.md#many-servers) and `core/doc.go`.\n",
		"core/doc.go":          "// Package core, see docs/design.md and core/removed.go (and 10.0.0.0/8).\npackage core\n",
		"core/go.mod":          "// Tests use internal/testkit.\nmodule x\n",
		"scripts/test.sh":      "",
		"examples/demo/doc.go": "// Run go run ./examples/demo or ./examples/gone.\npackage main\n",
		"benchmarks/README.md": "Run `./run.sh` and [the root](../README.md).\n",
		"benchmarks/run.sh":    "",
		"internal/keep.go":     "",
	})
	got, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`README.md:5: "docs/gone.md" does not exist`,
		`README.md:5: "CONTRIBUTING.md#nowhere": CONTRIBUTING.md has no heading #nowhere`,
		`README.md:6: "#nowhere": README.md has no heading #nowhere`,
		`README.md:7: "core/gone.go" does not exist`,
		`README.md:7: "gone.sh": no file of that name in the repository`,
		`README.md:11: "./examples/gone" does not exist`,
		`core/doc.go:1: "core/removed.go" does not exist`,
		`core/go.mod:1: "internal/testkit" does not exist`,
		`examples/demo/doc.go:1: "./examples/gone" does not exist`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}

func TestHeadingAnchors(t *testing.T) {
	md := "# A title\n## When Redis fails\n## `Reset`, and Retry-After\n```\n# not a heading\n```\n## When Redis fails\n### 1.28× faster?\n"
	want := []string{"a-title", "when-redis-fails", "reset-and-retry-after", "when-redis-fails-1", "128-faster"}
	if got := headingAnchors(md); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
