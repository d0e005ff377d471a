#!/usr/bin/env bash
# Proves what the root module promises: a program that imports core, keyfunc
# and nethttp depends on no third-party module.
#
# It builds a throwaway consumer in a temporary directory, outside the
# workspace (GOWORK=off), with a replace of the root module by this checkout,
# and runs `go mod tidy` as every real project does. Tidy matters: it also
# loads the tests of every package the program imports, so a third-party
# import in a test of core, keyfunc or nethttp (testify, say) would be added
# to the program's go.mod. Then `go list -m all` must list the program and
# this module only, and every package built must be ours or the standard
# library's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/local/go/bin"
export GOWORK=off GOFLAGS=

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

root=github.com/go-ratelimit/ratelimit
cat >go.mod <<MOD
module example.com/consumer

go $(GOWORK=off go mod edit -json "$repo/go.mod" | sed -n 's/^[[:space:]]*"Go": "\(.*\)",*$/\1/p')

require $root v0.0.0-00010101000000-000000000000

replace $root => $repo
MOD
# Blank imports: what matters is the dependency graph, and this stays true
# whatever the packages' API becomes.
cat >main.go <<'GO'
package main

import (
	_ "github.com/go-ratelimit/ratelimit/core"
	_ "github.com/go-ratelimit/ratelimit/keyfunc"
	_ "github.com/go-ratelimit/ratelimit/nethttp"
)

func main() {}
GO

fail=0
go mod tidy
go build ./...
mods=$(go list -m all)
echo "consumer's go list -m all:"
sed 's/^/  /' <<<"$mods"
if [ "$(wc -l <<<"$mods")" -ne 2 ] || ! grep -q "^$root " <<<"$mods"; then
	echo "consumer-proof: a program importing core, keyfunc and nethttp needs modules besides $root" >&2
	fail=1
fi
if grep -q '// indirect' go.mod; then
	echo "consumer-proof: go mod tidy added indirect requirements:" >&2
	cat go.mod >&2
	fail=1
fi
others=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... | grep -v -e '^example.com/consumer$' -e "^$root/" || true)
if [ -n "$others" ]; then
	echo "consumer-proof: packages outside $root and the standard library:" >&2
	echo "$others" >&2
	fail=1
fi
if [ "$fail" = 0 ]; then
	echo "consumer-proof: ok, no third-party module"
fi
exit $fail
