// Command report turns the output of a benchmark run (go test -bench lines
// and cmd/memkeys lines, in any number of files) into the Markdown tables of
// README.md: the median of each measurement, its ratio to the best peer of
// its scenario, and whether each of the targets is met.
//
// Usage:
//
//	report results/*.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-ratelimit/ratelimit/benchmarks"
)

func main() {
	runs := make(results)
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		runs.read(f)
		f.Close()
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "report: no benchmark lines in", os.Args[1:])
		os.Exit(1)
	}
	r := &report{results: runs, w: os.Stdout}
	r.clock()
	r.inMemory("1. One key, sequential, all allowed", "OneKeySeq", "/case=allow")
	r.inMemory("1. One key, sequential, all denied", "OneKeySeq", "/case=deny")
	r.inMemory("2. One key, parallel (a hot global limit)", "OneKeyParallel", "")
	r.inMemory("3. 100,000 keys, parallel, a pseudo-random key per request", "ManyKeysParallel", "/keys=100000")
	r.middleware()
	r.memory()
	r.redis()
	r.targets()
}

// results maps a benchmark name (without the -GOMAXPROCS suffix) and a unit
// to every value measured.
type results map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

func (res results) read(in io.Reader) {
	s := bufio.NewScanner(in)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			if res[name] == nil {
				res[name] = make(map[string][]float64)
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
}

// median returns the median of name's unit, and false if it was not measured.
func (res results) median(name, unit string) (float64, bool) {
	v := slices.Clone(res[name][unit])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

type report struct {
	results
	w     io.Writer
	goals []string // one line per target: met or missed, with the figures
}

func (r *report) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

func isOurs(lib string) bool { return strings.HasPrefix(lib, "ours") }

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// clock prints the cost of reading the clock, the floor under scenarios 1–3.
func (r *report) clock() {
	mono, ok1 := r.median("Clock/read=monotonic", "ns/op")
	now, ok2 := r.median("Clock/read=now", "ns/op")
	if ok1 && ok2 {
		r.printf("Reading the clock on this machine: %.1f ns for the monotonic clock (time.Since), %.1f ns for time.Now.\n", mono, now)
	}
}

// inMemory prints one of scenarios 1–3: every library's median time and
// allocations, and its ratio to the fastest peer. Every peer keeps per-key
// state (the single-key limiters run in the per-key wrapper users write).
func (r *report) inMemory(title, bench, suffix string) {
	type row struct {
		lib            string
		ns, allocs, bs float64
	}
	var rows []row
	best := math.Inf(1)
	bestLib := ""
	for _, lib := range benchmarks.Libs() {
		name := bench + "/lib=" + lib.Name + suffix
		ns, ok := r.median(name, "ns/op")
		if !ok {
			continue
		}
		allocs, _ := r.median(name, "allocs/op")
		bs, _ := r.median(name, "B/op")
		rows = append(rows, row{lib.Name, ns, allocs, bs})
		if !isOurs(lib.Name) && ns < best {
			best, bestLib = ns, lib.Name
		}
	}
	if len(rows) == 0 {
		return
	}
	r.printf("\n### %s\n\n| lib | ns/op | B/op | allocs/op | × fastest peer (%s) |\n|---|---:|---:|---:|---:|\n", title, bestLib)
	for _, x := range rows {
		r.printf("| %s | %.1f | %.0f | %.0f | %s |\n", x.lib, x.ns, x.bs, x.allocs, ratio(x.ns, best))
		if x.lib == "ours-token" {
			ok := x.ns <= 0.5*best && x.allocs == 0
			r.goals = append(r.goals, fmt.Sprintf("%s: ours-token %.1f ns/op = %s %s (%.1f ns/op), %.0f allocs/op; target ≤ 0.50× and 0 allocs: %s",
				title, x.ns, ratio(x.ns, best), bestLib, best, x.allocs, verdict(ok)))
		}
	}
}

// middleware prints scenario 4: per router, each stack's time and the
// overhead over that router's bare stack.
func (r *report) middleware() {
	type row struct {
		s                    benchmarks.Stack
		ns, overhead, allocs float64
	}
	var rows []row
	bestPeer, bestName := math.Inf(1), ""
	for _, s := range benchmarks.Stacks() {
		name := "Middleware/router=" + s.Router + "/lib=" + s.Lib
		ns, ok := r.median(name, "ns/op")
		bare, okBare := r.median("Middleware/router="+s.Router+"/lib=bare", "ns/op")
		if !ok || !okBare {
			continue
		}
		allocs, _ := r.median(name, "allocs/op")
		rows = append(rows, row{s, ns, ns - bare, allocs})
		if s.Lib != "bare" && !isOurs(s.Lib) && s.SetsHeaders && ns-bare < bestPeer {
			bestPeer, bestName = ns-bare, s.Router+"/"+s.Lib
		}
	}
	if len(rows) == 0 {
		return
	}
	r.printf("\n### 4. Middleware overhead over a bare handler (one client, sequential, all allowed)\n\n")
	r.printf("| router | lib | sets headers | ns/op | overhead ns | allocs/op | overhead × lowest header-setting peer (%s) |\n|---|---|---|---:|---:|---:|---:|\n", bestName)
	for _, x := range rows {
		if x.s.Lib == "bare" {
			r.printf("| %s | bare | – | %.1f | – | %.0f | – |\n", x.s.Router, x.ns, x.allocs)
			continue
		}
		r.printf("| %s | %s | %v | %.1f | %.1f | %.0f | %s |\n", x.s.Router, x.s.Lib, yesNo(x.s.SetsHeaders), x.ns, x.overhead, x.allocs, ratio(x.overhead, bestPeer))
		if isOurs(x.s.Lib) {
			r.goals = append(r.goals, fmt.Sprintf("4. middleware overhead, %s/%s: %.1f ns = %s %s (%.1f ns), %.0f allocs/op; target ≤ 0.25×: %s",
				x.s.Router, x.s.Lib, x.overhead, ratio(x.overhead, bestPeer), bestName, bestPeer, x.allocs, verdict(x.overhead <= 0.25*bestPeer)))
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// memory prints scenario 5 from cmd/memkeys' lines.
func (r *report) memory() {
	type row struct {
		lib                 benchmarks.Lib
		perKey, left, freed float64
	}
	var rows []row
	best, bestLib := math.Inf(1), ""
	for _, lib := range benchmarks.Libs() {
		name := "MemKeys/lib=" + lib.Name + "/keys=1000000"
		perKey, ok := r.median(name, "B/key")
		if !ok {
			continue
		}
		left, _ := r.median(name, "B/key-after-ttl")
		freed, _ := r.median(name, "%released")
		rows = append(rows, row{lib, perKey, left, freed})
		if !isOurs(lib.Name) && lib.WholeKeys && perKey < best {
			best, bestLib = perKey, lib.Name
		}
	}
	if len(rows) == 0 {
		return
	}
	r.printf("\n### 5. Memory: 1,000,000 fresh keys, then their TTL\n\n")
	r.printf("| lib | stores whole keys | bytes/key | bytes/key left after TTL | released | × best whole-key peer (%s) |\n|---|---|---:|---:|---:|---:|\n", bestLib)
	for _, x := range rows {
		// A library that frees nothing measures a hair either side of 0.
		freed := max(x.freed, 0)
		r.printf("| %s | %s | %.1f | %.1f | %.1f%% | %s |\n", x.lib.Name, yesNo(x.lib.WholeKeys), x.perKey, x.left, freed, ratio(x.perKey, best))
		if x.lib.Name == "ours-token" {
			ok := x.perKey <= 0.6*best && x.freed >= 90
			r.goals = append(r.goals, fmt.Sprintf("5. memory: ours-token %.1f B/key = %s %s (%.1f B/key), %.1f%% released; target ≤ 0.60× and ≥ 90%%: %s",
				x.perKey, ratio(x.perKey, best), bestLib, best, x.freed, verdict(ok)))
		}
	}
}

// redis prints scenario 6, one table per client setting (the default one
// first): sequential latency, throughput at 2 and 64 callers against the
// bare EVALSHA, and the server's time per decision.
func (r *report) redis() {
	for _, client := range benchmarks.RedisClients() {
		r.redisClient(client.Name)
	}
}

func (r *report) redisClient(client string) {
	type row struct {
		lib                     string
		seq, tp2, tp64, allocs  float64
		cpu                     [3]float64 // srv-cpu-ns/op at 1, 2, 64 callers
		script                  [3]float64
		hasSeq, hasTp2, hasTp64 bool
	}
	var rows []row
	var bare row
	var best1, best2 row // the peers' best latency and 2-caller throughput
	best1.seq = math.Inf(1)
	for _, lib := range benchmarks.RedisLibs() {
		name := "Redis/client=" + client + "/lib=" + lib.Name + "/callers="
		x := row{lib: lib.Name}
		x.seq, x.hasSeq = r.median(name+"1", "ns/op")
		x.tp2, x.hasTp2 = r.median(name+"2", "decisions/s")
		x.tp64, x.hasTp64 = r.median(name+"64", "decisions/s")
		x.allocs, _ = r.median(name+"1", "allocs/op")
		for i, callers := range []string{"1", "2", "64"} {
			x.cpu[i], _ = r.median(name+callers, "srv-cpu-ns/op")
			x.script[i], _ = r.median(name+callers, "srv-script-ns/op")
		}
		if !x.hasSeq && !x.hasTp2 && !x.hasTp64 {
			continue
		}
		rows = append(rows, x)
		switch {
		case lib.Name == "evalsha":
			bare = x
		case !isOurs(lib.Name):
			if x.seq < best1.seq {
				best1 = x
			}
			if x.tp2 > best2.tp2 {
				best2 = x
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	r.printf("\n### 6. Redis (client=%s): one local redis-server, all allowed, 100,000 keys\n\n", client)
	r.printf("| lib | 1 caller µs/op | × EVALSHA | 2 callers decisions/s | × best peer | 64 callers decisions/s | × EVALSHA | allocs/op (1 caller) | server CPU µs/decision at 1 / 2 / 64 callers | in scripts µs/decision at 1 / 2 / 64 |\n|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, x := range rows {
		r.printf("| %s | %.1f | %s | %.0f | %s | %.0f | %s | %.0f | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f |\n",
			x.lib, x.seq/1000, ratio(x.seq, bare.seq), x.tp2, ratio(x.tp2, best2.tp2), x.tp64, ratio(x.tp64, bare.tp64), x.allocs,
			x.cpu[0]/1000, x.cpu[1]/1000, x.cpu[2]/1000, x.script[0]/1000, x.script[1]/1000, x.script[2]/1000)
		if isOurs(x.lib) && client == "default" {
			r.goals = append(r.goals,
				fmt.Sprintf("6. Redis, 1 caller: %s %.1f µs = %s bare EVALSHA (%.1f µs), best peer %s %.1f µs; target ≤ 1.20× and faster than every peer: %s",
					x.lib, x.seq/1000, ratio(x.seq, bare.seq), bare.seq/1000, best1.lib, best1.seq/1000, verdict(x.seq <= 1.2*bare.seq && x.seq < best1.seq)),
				fmt.Sprintf("6. Redis, 2 callers: %s %.0f decisions/s = %s best peer %s (%.0f); target ≥ 1.00×: %s",
					x.lib, x.tp2, ratio(x.tp2, best2.tp2), best2.lib, best2.tp2, verdict(x.tp2 >= best2.tp2)),
				fmt.Sprintf("6. Redis, 64 callers: %s %.0f decisions/s = %s bare EVALSHA (%.0f); target ≥ 1.50×: %s",
					x.lib, x.tp64, ratio(x.tp64, bare.tp64), bare.tp64, verdict(x.tp64 >= 1.5*bare.tp64)),
				fmt.Sprintf("6. Redis, 64 callers: server CPU %.1f µs per decision; aim ≤ 3.0 µs: %s",
					x.cpu[2]/1000, verdict(x.cpu[2] <= 3000)))
		}
	}
}

func (r *report) targets() {
	if len(r.goals) == 0 {
		return
	}
	r.printf("\n### Targets\n\n")
	for _, g := range r.goals {
		r.printf("- %s\n", g)
	}
}
