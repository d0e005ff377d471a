#!/usr/bin/env bash
# Proves what the modules promise their users' module graphs (README: "a
# program gets only the dependencies it uses"):
#
#  1. A program that imports core, keyfunc and nethttp depends on no
#     third-party module: `go list -m all` lists the program and the root
#     module only, and every package built is ours or the standard library's.
#  2. A program that imports only one router adapter (chimw, ginmw, echomw,
#     echo5mw, grpcmw)
#     lists the root module, the adapter, and exactly the modules and versions
#     that a program importing only the router itself lists: nothing our
#     tests use (testify, goleak) reaches it. For chimw: chi, the root module
#     and chimw.
#
# Each program is a throwaway consumer in a temporary directory, outside the
# workspace (GOWORK=off), with replaces of this repository's modules by this
# checkout, and runs `go mod tidy` as every real project does. Tidy matters:
# it also loads the tests of every package the program imports, so a
# third-party import in a test of core, keyfunc or nethttp would be added to
# the program's go.mod; and an adapter's go.mod requirements, tests' included,
# are part of every graph that holds the adapter.
#
# A new adapter module adds one line to adapters below: its directory and the
# router module it adapts (the router's root package is imported).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/local/go/bin"
export GOWORK=off GOFLAGS=

root=github.com/go-ratelimit/ratelimit
placeholder=v0.0.0-00010101000000-000000000000
adapters=(
	"chimw github.com/go-chi/chi/v5"
	"ginmw github.com/gin-gonic/gin"
	"echomw github.com/labstack/echo/v4"
	"echo5mw github.com/labstack/echo/v5"
	"grpcmw google.golang.org/grpc"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gover=$(go mod edit -json "$repo/go.mod" | sed -n 's/^[[:space:]]*"Go": "\(.*\)",*$/\1/p')

# consumer DIR GOVERSION REQUIRE... -- IMPORT...: writes a program in DIR
# that requires each "path version" and blank-imports each package (what
# matters is the graph, whatever the packages' API becomes), replaces this
# repository's modules by the checkout, and tidies it.
consumer() {
	local dir=$1 gover=$2 path
	shift 2
	mkdir -p "$dir"
	{
		echo "module example.com/consumer"
		echo
		echo "go $gover"
		while [ "$1" != -- ]; do
			echo "require $1"
			path=${1% *}
			case $path in
			"$root" | "$root"/*) echo "replace $path => $repo${path#"$root"}" ;;
			esac
			shift
		done
	} >"$dir/go.mod"
	shift
	{
		echo "package main"
		echo
		echo "import ("
		for imp in "$@"; do echo "	_ \"$imp\""; done
		echo ")"
		echo
		echo "func main() {}"
	} >"$dir/main.go"
	(cd "$dir" && go mod tidy)
}

fail=0

# 1. The root module.
consumer "$tmp/root" "$gover" "$root $placeholder" -- "$root/core" "$root/keyfunc" "$root/nethttp"
(cd "$tmp/root" && go build ./...)
mods=$(cd "$tmp/root" && go list -m all)
echo "core, keyfunc and nethttp: go list -m all:"
sed 's/^/  /' <<<"$mods"
if [ "$(wc -l <<<"$mods")" -ne 2 ] || ! grep -q "^$root " <<<"$mods"; then
	echo "consumer-proof: a program importing core, keyfunc and nethttp needs modules besides $root" >&2
	fail=1
fi
if grep -q '// indirect' "$tmp/root/go.mod"; then
	echo "consumer-proof: go mod tidy added indirect requirements:" >&2
	cat "$tmp/root/go.mod" >&2
	fail=1
fi
others=$(cd "$tmp/root" && go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... | grep -v -e '^example.com/consumer$' -e "^$root/" || true)
if [ -n "$others" ]; then
	echo "consumer-proof: packages outside $root and the standard library:" >&2
	echo "$others" >&2
	fail=1
fi

# 2. Each adapter against its router alone, at the version the adapter
# requires and with the adapter's go directive.
for line in "${adapters[@]}"; do
	read -r dir router <<<"$line"
	modfile=$repo/$dir/go.mod
	ver=$(go mod edit -json "$modfile" | grep -A1 "\"Path\": \"$router\"" | sed -n 's/^[[:space:]]*"Version": "\(.*\)",*$/\1/p')
	agover=$(go mod edit -json "$modfile" | sed -n 's/^[[:space:]]*"Go": "\(.*\)",*$/\1/p')
	consumer "$tmp/$dir" "$agover" "$root $placeholder" "$root/$dir $placeholder" -- "$root/$dir"
	consumer "$tmp/$dir-router" "$agover" "$router $ver" -- "$router"
	got=$(cd "$tmp/$dir" && go list -m all | tail -n +2 | grep -v -e "^$root " -e "^$root/$dir " | cut -d' ' -f1,2 | sort)
	want=$(cd "$tmp/$dir-router" && go list -m all | tail -n +2 | cut -d' ' -f1,2 | sort)
	n=$(cd "$tmp/$dir" && go list -m all | wc -l)
	echo "$dir only: $n modules in go list -m all (the program, $root, $root/$dir, and $router's $(wc -l <<<"$want"))"
	if [ "$got" != "$want" ]; then
		echo "consumer-proof: a program importing only $dir lists modules that one importing only $router $ver does not (+), or misses some (-):" >&2
		diff <(echo "$want") <(echo "$got") | sed -n 's/^> /  + /p; s/^< /  - /p' >&2 || true
		fail=1
	fi
done

if [ "$fail" = 0 ]; then
	echo "consumer-proof: ok: no third-party module for the root, and no module an adapter's router does not bring"
fi
exit $fail
