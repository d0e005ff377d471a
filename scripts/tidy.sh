#!/usr/bin/env bash
# Runs `go mod tidy` in every module of this repository.
#
#   ./scripts/tidy.sh           # tidy every module
#   ./scripts/tidy.sh -check    # fail if that would change a go.mod or go.sum
#
# `go mod tidy` ignores go.work, and a nested module requires this
# repository's other modules at the placeholder version
# v0.0.0-00010101000000-000000000000 that only the workspace resolves. So each
# module is tidied with GOWORK=off and a temporary `replace` of every module
# of this repository by its directory, and the replaces are dropped again:
# published go.mod files carry no replace (consumers would ignore it anyway).
# The root module requires nothing and tidy must leave it so (see its
# go.mod). benchmarks keeps its replaces: it is never a dependency of
# anything and is outside the root go.work (benchmarks/go.work).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$PATH:/usr/local/go/bin"

check=0
if [ "${1:-}" = -check ]; then check=1; fi

# Every module of the workspace: "path dir" lines, root first.
mapfile -t mods < <(go list -m -f '{{.Path}} {{.Dir}}')
if [ "${#mods[@]}" -lt 2 ]; then
	echo "tidy.sh: go list -m found no workspace (is go.work there?)" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

replaces() { # dir -> -replace flags for every repo module but the one in dir
	local self=$1 line path dir rel
	for line in "${mods[@]}"; do
		path=${line%% *}
		dir=${line#* }
		[ "$dir" = "$self" ] && continue
		rel=$(realpath --relative-to="$self" "$dir")
		case $rel in ..*) ;; *) rel=./$rel ;; esac
		printf -- '-replace=%s=%s\n' "$path" "$rel"
	done
}

tidy() { # dir keep-replaces
	local dir=$1 keep=$2 flags
	mapfile -t flags < <(replaces "$dir")
	(
		cd "$dir"
		cp go.mod "$tmp/go.mod"
		rm -f "$tmp/go.sum"
		if [ -f go.sum ]; then cp go.sum "$tmp/go.sum"; fi
		restore() {
			cp "$tmp/go.mod" go.mod
			if [ -f "$tmp/go.sum" ]; then cp "$tmp/go.sum" go.sum; else rm -f go.sum; fi
		}
		# -check leaves the files as they were; a failed tidy too.
		if [ "$check" = 1 ]; then trap restore EXIT; else trap 'if [ $? != 0 ]; then restore; fi' EXIT; fi

		GOWORK=off go mod edit "${flags[@]}"
		GOWORK=off go mod tidy
		# Drop the replaces again (benchmarks keeps those of the modules it
		# requires).
		required=$(GOWORK=off go list -m -f '{{.Path}}' all)
		for f in "${flags[@]}"; do
			f=${f#-replace=}
			if [ "$keep" = 0 ] || ! grep -qxF "${f%%=*}" <<<"$required"; then
				GOWORK=off go mod edit -dropreplace="${f%%=*}"
			fi
		done
		same=1
		cmp -s go.mod "$tmp/go.mod" || same=0
		if [ -f go.sum ] || [ -f "$tmp/go.sum" ]; then
			cmp -s go.sum "$tmp/go.sum" 2>/dev/null || same=0
		fi
		if [ "$check" = 1 ] && [ "$same" = 0 ]; then
			label=${dir#"$root"}
			label=${label#/}
			echo "tidy.sh: ${label:+$label/}go.mod (or go.sum) is not tidy; run ./scripts/tidy.sh" >&2
			exit 1
		fi
	)
}

# The root module too: it requires nothing, and tidy must keep it so.
for line in "${mods[@]}"; do
	tidy "${line#* }" 0
done
tidy "$root/benchmarks" 1
