package rapid

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB captures what Check reports.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func TestRangesAndEnds(t *testing.T) {
	seen := map[int64]bool{}
	cases := 0
	Check(t, func(rt *T) {
		cases++
		v := Int64Range(-3, 3).Draw(rt, "v")
		if v < -3 || v > 3 {
			rt.Fatalf("out of range: %d", v)
		}
		seen[v] = true
		if n := IntRange(5, 5).Draw(rt, "n"); n != 5 {
			rt.Fatalf("IntRange(5, 5) = %d", n)
		}
		_ = Bool().Draw(rt, "b")
	})
	if cases != *checks || !seen[-3] || !seen[3] {
		t.Errorf("%d cases (want %d), seen %v", cases, *checks, seen)
	}
}

func TestFailureReportsSeedAndDrawsAndReplays(t *testing.T) {
	prop := func(rt *T) {
		v := IntRange(0, 1000).Draw(rt, "v")
		if v > 10 {
			rt.Errorf("too big: %d", v)
		}
	}
	var f fakeTB
	Check(&f, prop)
	if !strings.Contains(f.fatal, "-rapid.seed=") || !strings.Contains(f.fatal, "v: ") || !strings.Contains(f.fatal, "too big") {
		t.Fatalf("report: %q", f.fatal)
	}
	var s uint64
	if _, err := fmt.Sscanf(f.fatal[strings.Index(f.fatal, "-rapid.seed=")+len("-rapid.seed="):], "%d", &s); err != nil {
		t.Fatal(err)
	}
	defer func(old uint64) { *seed = old }(*seed)
	*seed = s
	var again fakeTB
	Check(&again, prop)
	if again.fatal != f.fatal {
		t.Errorf("replay differs:\n%s\n%s", again.fatal, f.fatal)
	}
}

func TestFailNowAndPanicEndTheCase(t *testing.T) {
	var f fakeTB
	after := false
	Check(&f, func(rt *T) {
		rt.FailNow()
		after = true
	})
	if after || !strings.Contains(f.fatal, "rapid.seed") {
		t.Errorf("FailNow: after=%v report %q", after, f.fatal)
	}
	f = fakeTB{}
	Check(&f, func(rt *T) { panic("boom") })
	if !strings.Contains(f.fatal, "panic: boom") {
		t.Errorf("panic: report %q", f.fatal)
	}
}
