// Package benchmarks measures the ratelimit library against the Go rate
// limiters people would otherwise use, side by side in one run on one
// machine. It is its own module, so that the peers it imports never enter the
// library's dependency graph.
//
// # What is here
//
// The package itself holds one wrapper per library, each configured to the
// same limit (Limit: N requests per Window) and reduced to one question, "may
// this key pass now?". The tests check that every wrapper admits and denies as
// configured; the benchmarks run the scenarios of README.md; cmd/memkeys
// measures bytes per key; cmd/report turns a run's output into the README's
// tables.
//
// # Running
//
//	./run.sh            # everything, -count=6, with benchstat tables
//	COUNT=1 ./run.sh    # a quick pass
package benchmarks
