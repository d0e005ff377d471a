package goleak

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

type recorder struct{ errs []string }

func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

func blockedFunc(c chan struct{}) { <-c }

func TestFindsALeakAndNothingElse(t *testing.T) {
	defer func(r int) { retries = r }(retries)
	retries = 3
	if err := Find(); err != nil {
		t.Fatalf("no leak yet: %v", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); blockedFunc(stop) }()
	var r recorder
	VerifyNone(&r)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "goleak.blockedFunc") || !strings.Contains(r.errs[0], "chan receive") {
		t.Errorf("leak not reported: %q", r.errs)
	}
	close(stop)
	<-done
	r.errs = nil
	VerifyNone(&r)
	if len(r.errs) != 0 {
		t.Errorf("after the goroutine ended: %q", r.errs)
	}
}

type fakeM int

func (m fakeM) Run() int { return int(m) }

func TestVerifyTestMain(t *testing.T) {
	defer func(e func(int), r int) { osExit, retries = e, r }(osExit, retries)
	retries = 2
	var code int
	osExit = func(c int) { code = c }
	var out bytes.Buffer
	stderr = &out

	VerifyTestMain(fakeM(0))
	if code != 0 || out.Len() != 0 {
		t.Errorf("clean run: exit %d, %q", code, out.String())
	}
	VerifyTestMain(fakeM(3))
	if code != 3 {
		t.Errorf("failed run: exit %d, want 3", code)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); blockedFunc(stop) }()
	VerifyTestMain(fakeM(0))
	close(stop)
	<-done
	if code != 1 || !strings.Contains(out.String(), "blockedFunc") {
		t.Errorf("leaky run: exit %d, %q", code, out.String())
	}
}
