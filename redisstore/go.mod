// Module redisstore: the Redis store.
//
// go 1.25: the floor set by the root module; go-redis v9.22.0 needs 1.24.
// go-redis v9.22.0 is the newest v9 that Go 1.25 can build: v9.23.0 declares
// go 1.26.0 and would force every redisstore user onto Go 1.26.
//
// Published go.mod: no replace here. It requires this repository's other
// modules at the placeholder v0.0.0-00010101000000-000000000000, which the
// go.work at the repository root resolves during development; a release
// requires their tags instead (README, "Modules"). Tidy with
// ./scripts/tidy.sh, not `go mod tidy` (which ignores go.work).
module github.com/go-ratelimit/ratelimit/redisstore

go 1.25

require (
	github.com/go-ratelimit/ratelimit v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.11.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
