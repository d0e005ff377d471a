// Command memkeys measures scenario 5 for one library per process: the heap
// bytes per key after inserting fresh keys, and what is left once they have
// been idle past their TTL and the library has cleaned up the way it does.
//
// Usage:
//
//	memkeys -lib=ours-token [-keys=1000000] [-ttl=5s]
//	memkeys -list
//
// Each key sends one request under a limit of 1 per TTL, so every key is
// stored (and, for the libraries that can tell, limited) until its TTL has
// passed. Keys are built fresh (ClientKey), so a library that keeps the key
// string pays for it. The heap is read with runtime.MemStats.HeapAlloc after
// runtime.GC, three times: with the limiter built and empty, after the
// inserts, and 2.2 TTLs after the inserts (when every library's sweeper has
// run at least once past the keys' expiry), after triggering the lazy ones
// (Limiter.Sweep). The result is printed as a Go benchmark line, so benchstat
// and cmd/report read it with the rest.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/go-ratelimit/ratelimit/benchmarks"
)

func main() {
	libName := flag.String("lib", "", "library to measure (see -list)")
	keys := flag.Int("keys", 1_000_000, "fresh keys to insert")
	ttl := flag.Duration("ttl", 15*time.Second, "window and idle-key TTL; the inserts must finish within it")
	list := flag.Bool("list", false, "print the library names, one a line, with how each cleans up")
	flag.Parse()
	if *list {
		for _, l := range benchmarks.Libs() {
			fmt.Printf("%s\t%s\n", l.Name, l.Cleanup)
		}
		return
	}
	if err := run(*libName, *keys, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "memkeys:", err)
		os.Exit(1)
	}
}

func run(name string, keys int, ttl time.Duration) error {
	var lib *benchmarks.Lib
	for _, l := range benchmarks.Libs() {
		if l.Name == name {
			lib = &l
		}
	}
	if lib == nil {
		return fmt.Errorf("unknown -lib %q (see -list)", name)
	}
	if keys <= 0 || ttl <= 0 {
		return fmt.Errorf("-keys and -ttl must be > 0")
	}
	// Room for every key in the libraries with a bound, so that the figure
	// is the cost of storing keys, not of refusing them.
	lim, err := lib.New(benchmarks.Limit{N: 1, Window: ttl}, benchmarks.Config{TTL: ttl, MaxKeys: 2 * keys})
	if err != nil {
		return err
	}
	defer lim.Close()

	empty := heap()
	start := time.Now()
	for i := range keys {
		ok, err := lim.Allow(benchmarks.ClientKey(i))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s denied the first request of key %d", name, i)
		}
	}
	if took := time.Since(start); took >= ttl*8/10 {
		return fmt.Errorf("the inserts took %v, too close to the TTL %v for the keys to be all present: raise -ttl", took, ttl)
	}
	full := heap()
	stored := ""
	if l, ok := lim.(interface{ Len() int }); ok {
		stored = fmt.Sprintf(" %d keys-stored", l.Len())
	}

	// The last key expires a TTL after the inserts (1.1 TTL for our sliding
	// window, whose recovery time is 11 of its 10 buckets), and every sweeper
	// runs at least once a TTL (1.1 for ours-sliding) after that.
	time.Sleep(ttl*22/10 + 500*time.Millisecond)
	lim.Sweep()
	left := heap()
	runtime.KeepAlive(lim)

	used := float64(full) - float64(empty)
	fmt.Printf("BenchmarkMemKeys/lib=%s/keys=%d 1 %.1f B/key %.1f B/key-after-ttl %.1f %%released%s\n",
		name, keys, used/float64(keys), (float64(left)-float64(empty))/float64(keys),
		100*(float64(full)-float64(left))/used, stored)
	return nil
}

// heap returns the live heap after a full collection.
func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
