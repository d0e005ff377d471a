// The root module: core, keyfunc, nethttp, and the test kits core/coretest
// and nethttp/adaptertest. It requires nothing but the standard library, so
// that a net/http program's `go list -m all` shows no module of ours but
// this one. Everything that needs a third-party module (chimw, ginmw,
// echomw, redisstore, examples, benchmarks) is a module of its own.
//
// Keep this file without a require, tests included: `go mod tidy` in a
// program that imports core or nethttp also loads their tests, so a module
// imported by one of our tests would land in that program's go.mod. The
// tests here use the standard library only (plain testing, as x/time/rate
// and chi write them). `go mod tidy` here must leave this file as it is;
// .ci/run checks that (scripts/check-modules.sh), and that a throwaway
// consumer's `go list -m all` lists this module only
// (scripts/consumer-proof.sh).
//
// go 1.25: the tests use testing/synctest.Test and nethttp/adaptertest uses
// sync.WaitGroup.Go, both new in Go 1.25. (core, keyfunc and nethttp alone
// need 1.23, for http.Request.Pattern.)
module github.com/go-ratelimit/ratelimit

go 1.25
