// Module otelhook: OpenTelemetry metrics for the middleware's hooks.
//
// go 1.25.0: OpenTelemetry v1.46.0 declares it. v1.46.0 is the newest
// release that Go 1.25 can build: v1.47.0 declares go 1.26.0 and would force
// every otelhook user onto Go 1.26. The package imports the metrics API only
// (go.opentelemetry.io/otel/metric, and go.opentelemetry.io/otel for
// attribute and the global provider); the SDK (go.opentelemetry.io/otel/sdk/metric)
// is required by the tests alone, which read the measurements with its
// ManualReader; a program that imports otelhook does not build it.
// testify v1.12.1, not the v1.11.1 of the other modules: the SDK requires it.
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (CONTRIBUTING.md, "Releases"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work).
module github.com/go-ratelimit/ratelimit/otelhook

go 1.25.0

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel v1.46.0
	go.opentelemetry.io/otel/metric v1.46.0
	go.opentelemetry.io/otel/sdk/metric v1.46.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/sdk v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
