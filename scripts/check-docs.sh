#!/usr/bin/env bash
# Fails when README.md, CONTRIBUTING.md, docs/*.md, benchmarks/README.md, a
# doc.go or a go.mod comment cites a file, directory or Markdown heading of
# this repository that does not exist (paths in links, code spans and
# commands; see examples/internal/docpaths for what counts as a citation).
# Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
go run ./examples/internal/docpaths .
echo "check-docs: ok"
