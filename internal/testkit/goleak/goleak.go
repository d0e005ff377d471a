// Package goleak is a dependency-free stand-in for the part of
// go.uber.org/goleak that the root module's tests use (see package testkit
// for why): VerifyTestMain and VerifyNone, with goleak's default filters and
// retries and no options.
package goleak

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// TestingT is the subset of testing.TB that VerifyNone needs.
type TestingT interface {
	Error(args ...any)
}

// TestingM is the subset of testing.M that VerifyTestMain needs.
type TestingM interface {
	Run() int
}

// Variables for stubbing in this package's tests.
var (
	osExit             = os.Exit
	stderr   io.Writer = os.Stderr
	retries            = 20 // as goleak: up to about 0.4 s in all
	maxSleep           = 100 * time.Millisecond
)

// VerifyTestMain runs the tests and, if they passed, fails the test binary
// when goroutines other than the testing package's are still running:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
func VerifyTestMain(m TestingM) {
	code := m.Run()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintf(stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	osExit(code)
}

// VerifyNone fails t when goroutines other than the caller's and the
// testing package's are still running, after retrying for a short while to
// let goroutines that are ending end.
func VerifyNone(t TestingT) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	if err := Find(); err != nil {
		t.Error(err)
	}
}

// Find returns an error naming the goroutines, other than the caller's and
// the testing package's, that are still running after the retries.
func Find() error {
	self := current().id
	var left []goroutine
	for i := 0; ; i++ {
		left = left[:0]
		for _, g := range all() {
			if g.id != self && !ignored(g) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if i >= retries {
			break
		}
		time.Sleep(min(time.Duration(1<<i)*time.Microsecond, maxSleep))
	}
	var b strings.Builder
	b.WriteString("found unexpected goroutines:")
	for _, g := range left {
		fmt.Fprintf(&b, "\n[Goroutine %d in state %s, with %s on top of the stack:\n%s\n]", g.id, g.state, g.first(), g.trace)
	}
	return fmt.Errorf("%s", b.String())
}

// ignored reports goroutines that goleak ignores by default: the testing
// package's own, CGo's syscall ones and os/signal's.
func ignored(g goroutine) bool {
	switch g.first() {
	case "testing.RunTests", "testing.(*T).Run", "testing.(*T).Parallel", "testing.runFuzzing", "testing.runFuzzTests":
		if strings.HasPrefix(g.state, "chan receive") {
			return true
		}
	case "os/signal.signal_recv", "os/signal.loop":
		return true
	}
	if g.has("runtime.goexit") && strings.HasPrefix(g.state, "syscall") {
		return true
	}
	return g.has("runtime.ensureSigM")
}

type goroutine struct {
	id    int
	state string
	funcs []string // function names, innermost first
	trace string
}

func (g goroutine) first() string {
	if len(g.funcs) == 0 {
		return ""
	}
	return g.funcs[0]
}

func (g goroutine) has(fn string) bool {
	for _, f := range g.funcs {
		if f == fn {
			return true
		}
	}
	return false
}

func current() goroutine { return parse(stacks(false))[0] }

func all() []goroutine { return parse(stacks(true)) }

func stacks(all bool) []byte {
	for n := 1 << 16; ; n *= 2 {
		buf := make([]byte, n)
		if m := runtime.Stack(buf, all); m < n {
			return buf[:m]
		}
	}
}

// parse reads runtime.Stack's output: goroutines separated by blank lines,
// each a "goroutine N [state]:" line, then a function line and a file line
// per frame, and maybe "created by F in goroutine M" with its file line.
func parse(b []byte) []goroutine {
	var gs []goroutine
	for _, block := range bytes.Split(bytes.TrimSpace(b), []byte("\n\n")) {
		lines := strings.Split(string(block), "\n")
		var g goroutine
		if _, err := fmt.Sscanf(lines[0], "goroutine %d [", &g.id); err != nil {
			continue
		}
		if i, j := strings.Index(lines[0], "["), strings.LastIndex(lines[0], "]"); i >= 0 && j > i {
			g.state = lines[0][i+1 : j]
		}
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || l == "" {
				continue
			}
			l = strings.TrimPrefix(l, "created by ")
			if i := strings.Index(l, " in goroutine "); i >= 0 {
				l = l[:i]
			}
			if i := strings.LastIndex(l, "("); i > 0 && strings.HasSuffix(l, ")") {
				l = l[:i]
			}
			g.funcs = append(g.funcs, l)
		}
		g.trace = strings.Join(lines[1:], "\n")
		gs = append(gs, g)
	}
	return gs
}
