#!/usr/bin/env bash
# Runs the tests of every module in this repository; arguments go to go test.
#
#   ./test.sh                 # what the README says
#   ./test.sh -race -count=1  # what .ci/run runs
#
# The repository is several modules (see CONTRIBUTING.md, "Modules"). In the workspace
# of go.work, `go test ./...` at the root tests only the root module, so this
# names every module's packages: github.com/go-ratelimit/ratelimit/... matches
# the packages of all the modules that go.work uses. benchmarks is a
# workspace of its own (its pinned peers stay out of the others' builds), so it
# is tested from its directory.
set -uo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin"

rc=0
go test "$@" github.com/go-ratelimit/ratelimit/... || rc=1
(cd benchmarks && go test "$@" ./...) || rc=1
exit $rc
