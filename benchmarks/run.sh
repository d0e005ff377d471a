#!/usr/bin/env bash
# Runs every scenario of README.md side by side on this machine and prints
# benchstat tables and the README's report (medians, ratios, targets).
#
#   ./run.sh                      # the full run: 6 passes of every benchmark, memkeys for every library
#   ./run.sh -count 1             # a quick pass (COUNT=1 works too)
#   ./run.sh -bench 'OneKey' -nomem   # a subset, without the memory scenario
#   ./run.sh -ttl 60s             # memkeys' TTL (default 15s), for a loaded machine
#
# Each pass runs every benchmark once (-count=1) and the passes are repeated,
# so that a burst of noise on a shared machine lands on all libraries alike
# instead of on the six samples of one. Scenario 6 runs against a
# redis-server this script starts on a free loopback port and stops, when
# redis-server is installed (apt-get install redis-server); otherwise it is
# skipped. Output goes to $OUT (default results/<date>).
set -euo pipefail
cd "$(dirname "$0")"

COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
BENCH=${BENCH:-.}
MEM=1
KEYS=${KEYS:-1000000}
TTL=${TTL:-15s}
OUT=${OUT:-results/$(date -u +%Y%m%d-%H%M%S)}
BENCHSTAT=golang.org/x/perf/cmd/benchstat@v0.0.0-20260709024250-82a0b07e230d

while [ $# -gt 0 ]; do
	case $1 in
	-count) COUNT=$2; shift 2 ;;
	-benchtime) BENCHTIME=$2; shift 2 ;;
	-bench) BENCH=$2; shift 2 ;;
	-nomem) MEM=0; shift ;;
	-ttl) TTL=$2; shift 2 ;;
	-out) OUT=$2; shift 2 ;;
	*) echo "run.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
	esac
done

mkdir -p "$OUT"
tmp=$(mktemp -d)
redis_pid=
cleanup() {
	if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version)" | tee "$OUT/machine.txt"

echo "== building benchstat, the benchmarks and memkeys"
GOBIN=$tmp go install "$BENCHSTAT"
go test -c -o "$tmp/bench.test" .
go build -o "$tmp/memkeys" ./cmd/memkeys

if command -v redis-server >/dev/null; then
	# A free loopback port: one where nothing answers a connect.
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 20000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
	done
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize no >"$tmp/redis.log" 2>&1 &
	redis_pid=$!
	for _ in $(seq 50); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
		sleep 0.1
	done
	export REDIS_ADDR=127.0.0.1:$port
	echo "== redis-server $(redis-server --version | awk '{print $3}') on $REDIS_ADDR"
else
	echo "== redis-server is not installed: scenario 6 (Redis) is skipped; apt-get install redis-server to run it"
	export REDIS_ADDR=
fi

skip=
[ -z "$REDIS_ADDR" ] && skip='Redis'
for i in $(seq "$COUNT"); do
	echo "== pass $i of $COUNT"
	# -test.skip keeps the Redis benchmarks from starting a server of their own.
	"$tmp/bench.test" -test.run '^$' -test.bench "$BENCH" ${skip:+-test.skip "$skip"} \
		-test.benchtime "$BENCHTIME" -test.count 1 | tee -a "$OUT/bench.txt" | grep -E '^Benchmark|FAIL|panic' || true
done

if [ "$MEM" = 1 ]; then
	echo "== scenario 5: memkeys, one process per library ($KEYS keys)"
	for lib in $("$tmp/memkeys" -list | cut -f1); do
		# A library whose inserts outlast the TTL is reported, not fatal.
		"$tmp/memkeys" -lib "$lib" -keys "$KEYS" -ttl "$TTL" | tee -a "$OUT/memkeys.txt" ||
			echo "== memkeys -lib $lib failed: see above (-ttl raises the TTL)"
	done
	"$tmp/memkeys" -list >"$OUT/cleanup.txt"
fi

echo
echo "== benchstat (median ± 95% confidence interval of the $COUNT passes)"
"$tmp/benchstat" "$OUT/bench.txt" | tee "$OUT/benchstat.txt"
echo
echo "== report"
go run ./cmd/report "$OUT"/bench.txt $( [ "$MEM" = 1 ] && echo "$OUT/memkeys.txt" ) | tee "$OUT/report.md"
echo
echo "== results in $OUT"
