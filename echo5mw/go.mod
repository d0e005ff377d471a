// Module echo5mw: the echo v5 adapter (echomw serves echo v4).
//
// go 1.25.0: echo v5.4.6 declares it (and the root module needs 1.25).
// echo v5.4.6 is the newest v5 release: at least v5.2.0, whose rate-limiter
// middleware calls a store's AllowContext (Store sets the rate-limit headers
// through it), and past v5.1.0, whose Context.RealIP reads forwarding headers
// only through an IPExtractor (echo's rate limiter keys on RealIP).
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (CONTRIBUTING.md, "Releases"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work).
module github.com/go-ratelimit/ratelimit/echo5mw

go 1.25.0

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/labstack/echo/v5 v5.4.6
)

require golang.org/x/time v0.15.0 // indirect
