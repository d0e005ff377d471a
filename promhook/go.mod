// Module promhook: a Prometheus collector for the middleware's hooks.
//
// go 1.25.0: client_golang v1.24.1 declares it (the root module's floor is
// 1.25 too). client_golang v1.24.1 is the newest that Go 1.25 can build:
// v1.25.0 declares go 1.26.0 and would force every promhook user (and this
// workspace) onto Go 1.26; a program on Go 1.26 can require it itself.
// client_model is for the tests, which read gathered metrics.
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (CONTRIBUTING.md, "Releases"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work).
module github.com/go-ratelimit/ratelimit/promhook

go 1.25.0

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.24.1
	github.com/prometheus/client_model v0.6.2
	github.com/stretchr/testify v1.11.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/prometheus/common v0.70.1 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
