// Module chimw: the chi adapter.
//
// go 1.25: the floor set by the root module (whose tests use
// testing/synctest.Test and sync.WaitGroup.Go); chi itself needs 1.24.
// chi v5.5.0, the newest: at least v5.3.0, the release that deprecated
// middleware.RealIP for the new middleware.ClientIP* (GHSA-3fxj-6jh8-hvhx,
// GHSA-rjr7-jggh-pgcp, GHSA-9g5q-2w5x-hmxf). chimw never used RealIP and its
// docs warn against mounting it before a limit (CONTRIBUTING.md, "Go
// versions and dependencies").
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (CONTRIBUTING.md, "Releases"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work).
module github.com/go-ratelimit/ratelimit/chimw

go 1.25

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
)
