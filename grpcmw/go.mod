// Module grpcmw: gRPC interceptors over the core limiters.
//
// go 1.26.0: google.golang.org/grpc v1.85.0 and genproto's googleapis/rpc
// declare it (so this module needs Go 1.26 where the root needs 1.25).
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (CONTRIBUTING.md, "Releases"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work). The tests
// use the standard library only: a user's module graph lists no test-only
// module.
module github.com/go-ratelimit/ratelimit/grpcmw

go 1.26.0

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
