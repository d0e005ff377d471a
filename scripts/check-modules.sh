#!/usr/bin/env bash
# Checks the module layout that CONTRIBUTING.md ("Modules") describes; run by .ci/run.
#
#  1. The root go.mod requires nothing, and `go mod tidy` outside the
#     workspace would keep it so: core, keyfunc, nethttp and their tests
#     import only the standard library and this module.
#  2. Every go.mod of the repository is used by go.work, except benchmarks.
#  3. No published go.mod (all but benchmarks) has a replace directive.
#  4. Every nested module's go.mod and go.sum are tidy (scripts/tidy.sh).
#  5. The module graphs users get (scripts/consumer-proof.sh): a throwaway
#     program importing core, keyfunc and nethttp lists no third-party
#     module, and one importing only chimw, ginmw or echomw lists no module
#     its router does not bring (no test-only module of ours).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
fail=0

if GOWORK=off go mod edit -json go.mod | grep -q '"Require": \['; then
	echo "check-modules: the root go.mod has a require; it must need only the standard library (see its comment)" >&2
	fail=1
fi
if ! GOWORK=off go mod tidy -diff >/dev/null 2>&1; then
	echo "check-modules: outside the workspace the root module is not tidy: something in core, keyfunc or nethttp" >&2
	echo "(tests included) imports a third-party module. GOWORK=off go mod tidy -diff says:" >&2
	GOWORK=off go mod tidy -diff >&2 || true
	fail=1
fi

used=$(go list -m -f '{{.Dir}}' | sed "s|^$PWD|.|; s|^\.$|./|")
while read -r mod; do
	dir=$(dirname "$mod")
	[ "$dir" = . ] && dir=./ || dir=./$dir
	[ "$dir" = ./benchmarks ] && continue
	if ! grep -qxF "$dir" <<<"$used"; then
		echo "check-modules: $dir/go.mod is not in go.work's use list" >&2
		fail=1
	fi
	if GOWORK=off go mod edit -json "$mod" | grep -q '"Replace": \['; then
		echo "check-modules: $mod has a replace directive; published go.mod files carry none (go.work resolves the placeholders)" >&2
		fail=1
	fi
done < <(git ls-files --cached --others --exclude-standard '*go.mod' | grep -E '(^|/)go\.mod$')

./scripts/tidy.sh -check || fail=1
./scripts/consumer-proof.sh || fail=1

if [ "$fail" = 0 ]; then
	echo "check-modules: ok"
fi
exit $fail
