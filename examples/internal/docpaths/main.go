// Command docpaths fails when a document of the repository cites a file or
// directory of the repository that does not exist, or a Markdown heading
// that does not: a stale path is a broken promise to a reader. Run from the
// repository root (scripts/check-docs.sh does, in CI):
//
//	go run ./examples/internal/docpaths [root]
//
// It reads README.md, CONTRIBUTING.md, docs/*.md, benchmarks/README.md, and
// the comments of every doc.go and go.mod. In Markdown a citation is a link
// target ("[text](core/doc.go#policies)", its anchor checked against the
// target's headings) or a path in a code span ("`redisstore/doc.go`", and in
// the commands of a fenced block, "./examples/demo"); in Go comments, a word
// that is a path. A word is a path when it starts with "./" or "../", or its
// first element names a top-level file or directory ("nethttp/adaptertest"),
// or, in a code span, it is a bare file name with a known extension
// ("`test.sh`", found anywhere in the tree). Import paths, URLs, globs and
// placeholders ("chimw/vX.Y.Z", "…/chimw") are not citations. A path is
// looked up from the repository root and from the citing file's directory.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems, err := check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docpaths:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "docpaths: %d citations of paths or headings that do not exist\n", len(problems))
		os.Exit(1)
	}
}

// check returns a line "file:line: problem" per broken citation in the
// documents under root.
func check(root string) ([]string, error) {
	t, err := newTree(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, doc := range t.documents() {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		var cites []citation
		if strings.HasSuffix(doc, ".md") {
			cites = markdownCitations(string(text), t)
		} else {
			cites = goCommentCitations(string(text), t)
		}
		for _, c := range cites {
			if msg := t.verify(doc, c); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", doc, c.line, msg))
			}
		}
	}
	return problems, nil
}

// tree is what exists under the repository root.
type tree struct {
	root     string
	top      map[string]bool // names of the top-level entries
	basename map[string]bool // base names of every file
	files    []string        // every file, slash-separated, relative to root
}

func newTree(root string) (*tree, error) {
	t := &tree{root: root, top: map[string]bool{}, basename: map[string]bool{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.Name() == ".git" { // a directory, or a file in a worktree
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.Contains(rel, "/") {
			t.top[rel] = true
		}
		if !d.IsDir() {
			t.basename[d.Name()] = true
			t.files = append(t.files, rel)
		}
		return nil
	})
	return t, err
}

// documents lists the files whose citations are checked.
func (t *tree) documents() []string {
	var docs []string
	for _, f := range t.files {
		dir, name := filepath.Split(f)
		switch {
		case f == "README.md", f == "CONTRIBUTING.md", f == "benchmarks/README.md",
			dir == "docs/" && strings.HasSuffix(name, ".md"),
			name == "doc.go", name == "go.mod":
			docs = append(docs, f)
		}
	}
	slices.Sort(docs)
	return docs
}

// exists reports whether path, relative to the root or to the directory of
// the citing document doc, names a file or directory.
func (t *tree) exists(doc, path string) bool {
	for _, base := range []string{t.root, filepath.Join(t.root, filepath.Dir(doc))} {
		if _, err := os.Stat(filepath.Join(base, filepath.FromSlash(path))); err == nil {
			return true
		}
	}
	return false
}
