// Module echomw: the echo adapter.
//
// go 1.25.0: echo v4.16.0 declares it (and the root module needs 1.25).
// echo v4.16.0 is the newest v4 that Go 1.25 can build: v4.16.3 and later
// declare go 1.26.0, and requiring them would force every echomw user onto
// Go 1.26. Their fixes (Context.RealIP ignoring X-Forwarded-For by default,
// the proxy and redirect middlewares) touch nothing echomw uses; a program
// on Go 1.26 can require a newer echo itself, since this is only a minimum.
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (README, "Modules"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work).
module github.com/go-ratelimit/ratelimit/echomw

go 1.25.0

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/labstack/echo/v4 v4.16.0
)

require (
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	golang.org/x/crypto v0.53.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
