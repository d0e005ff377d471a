package adaptertest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// VerifyTestMain runs the tests of m and exits, failing them when they pass
// but leave a goroutine behind (a limiter not closed, a server not shut
// down): the number of goroutines must come back to what it was before them
// within a few seconds. Call it from TestMain:
//
//	func TestMain(m *testing.M) { adaptertest.VerifyTestMain(m) }
//
// It is the standard library's answer to goleak.VerifyTestMain, so that an
// adapter's go.mod requires no test-only module that would reach its users'
// module graphs.
func VerifyTestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "%d goroutines left after the tests, %d before:\n%s\n", n, before, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}
