// Package testkit holds dependency-free stand-ins for the parts of testify
// (assert, require), goleak and rapid that the root module's tests use.
//
// Why they exist: `go mod tidy` in a program that imports core or nethttp
// loads the tests of those packages too, so every module their tests import
// ends up in that program's go.mod and `go list -m all`. The root module
// promises its users the standard library only, so its tests, core/coretest
// and nethttp/adaptertest import nothing outside this module. The modules of
// the adapters, redisstore and examples keep using testify and goleak.
//
// Each stand-in keeps the names and signatures of the original for the
// subset used, so a test reads the same; the failure messages are plainer.
package testkit
