// Package readme compiles every Go snippet of the repository's README.md,
// so that the README cannot drift from the API: snippets.go, which go
// generate writes from the README (./gen), holds each ```go block as the
// body of a function, with line directives, so a snippet that no longer
// compiles fails the build, and go vet, at its line in README.md. gen's
// tests fail when snippets.go is not the README's.
package readme

//go:generate go run ./gen
