package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// citation is a path a document cites.
type citation struct {
	line   int
	path   string // relative; "" for an anchor in the citing document
	anchor string // the heading a Markdown link names, or ""
	bare   bool   // a file name without a directory, looked up anywhere
}

var (
	linkRE = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	spanRE = regexp.MustCompile("`([^`]+)`")
	// fileExt are the extensions that make a bare name in a code span a
	// file name ("`test.sh`") rather than code ("`core.New`").
	fileExt = []string{".md", ".go", ".sh", ".lua", ".mod", ".sum", ".work"}
)

// markdownCitations returns the links and the paths of t in code spans of
// the Markdown text md, and the "./" paths in its fenced blocks.
func markdownCitations(md string, t *tree) []citation {
	var out []citation
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			for _, w := range strings.Fields(line) {
				// ./x.test: a test binary the commands build.
				if w = trimWord(w); strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") {
					if pathLike(w, t) && !strings.HasSuffix(w, ".test") {
						out = append(out, citation{line: n, path: w})
					}
				}
			}
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			out = append(out, citation{line: n, path: path, anchor: anchor})
		}
		for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
			for _, w := range strings.Fields(m[1]) {
				out = append(out, spanCitations(n, trimWord(w), t)...)
			}
		}
	}
	return out
}

// spanCitations returns the citation that the word w of a code span is, if
// any.
func spanCitations(line int, w string, t *tree) []citation {
	if strings.Contains(w, "/") {
		if pathLike(w, t) {
			return []citation{{line: line, path: w}}
		}
		return nil
	}
	for _, ext := range fileExt {
		if strings.HasSuffix(w, ext) && len(w) > len(ext) && pathLike(w, nil) {
			return []citation{{line: line, path: w, bare: true}}
		}
	}
	return nil
}

// goCommentCitations returns the words of the comments of the Go or go.mod
// source src that are paths of t.
func goCommentCitations(src string, t *tree) []citation {
	var out []citation
	for i, line := range strings.Split(src, "\n") {
		_, comment, ok := strings.Cut(line, "//")
		if !ok {
			continue
		}
		for _, w := range strings.Fields(comment) {
			if w = trimWord(w); strings.Contains(w, "/") && pathLike(w, t) {
				out = append(out, citation{line: i + 1, path: w})
			}
		}
	}
	return out
}

// trimWord strips the punctuation around a path in prose.
func trimWord(w string) string {
	return strings.TrimRight(strings.TrimLeft(w, "\"'(<[`"), "\"'),.;:>]`")
}

// pathLike reports whether w reads as a path of the repository rather than
// an import path, a URL, a glob or a placeholder. With a tree, a path that
// does not start with "./" must start with one of its top-level names.
func pathLike(w string, t *tree) bool {
	if w == "" || strings.ContainsAny(w, "*{}<>$=…@?,") || strings.Contains(w, "...") ||
		strings.Contains(w, "://") || strings.HasPrefix(w, "/") || strings.HasPrefix(w, "-") {
		return false
	}
	for _, el := range strings.Split(w, "/") {
		// Module tags and versions: chimw/vX.Y.Z, chi/v5.
		if len(el) > 1 && el[0] == 'v' && (el[1] == 'X' || unicode.IsDigit(rune(el[1]))) {
			return false
		}
	}
	if strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") || t == nil {
		return true
	}
	first, _, _ := strings.Cut(w, "/")
	return t.top[first]
}

// verify returns what is wrong with the citation c in the document doc, or
// "".
func (t *tree) verify(doc string, c citation) string {
	if c.bare {
		if !t.basename[c.path] {
			return fmt.Sprintf("%q: no file of that name in the repository", c.path)
		}
		return ""
	}
	target := doc
	if c.path != "" {
		if !t.exists(doc, c.path) {
			return fmt.Sprintf("%q does not exist", c.path)
		}
		target = t.resolve(doc, c.path)
	}
	if c.anchor == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	md, err := os.ReadFile(filepath.Join(t.root, target))
	if err != nil {
		return fmt.Sprintf("%q: %v", c.path, err)
	}
	if !slices.Contains(headingAnchors(string(md)), c.anchor) {
		return fmt.Sprintf("%q: %s has no heading #%s", c.path+"#"+c.anchor, target, c.anchor)
	}
	return ""
}

// resolve returns the slash-separated path, relative to the root, that the
// citation path of doc names.
func (t *tree) resolve(doc, path string) string {
	rel := filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
	if _, err := os.Stat(filepath.Join(t.root, rel)); err == nil {
		return rel
	}
	return filepath.ToSlash(filepath.Clean(path))
}

// headingAnchors returns the anchors GitHub gives the headings of md:
// lower case, punctuation dropped, spaces as hyphens, "-1", "-2" appended to
// repeats.
func headingAnchors(md string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			a = fmt.Sprintf("%s-%d", a, n)
		}
		seen[b.String()]++
		out = append(out, a)
	}
	return out
}
