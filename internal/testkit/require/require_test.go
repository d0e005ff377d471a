package require

import (
	"errors"
	"fmt"
	"testing"
)

type recorder struct {
	errs    []string
	stopped bool
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) FailNow() { r.stopped = true }

func TestFailNowOnlyOnFailure(t *testing.T) {
	var ok recorder
	NoError(&ok, nil)
	Equal(&ok, 1, 1)
	PanicsWithError(&ok, "x", func() { panic(errors.New("x")) })
	if ok.stopped || len(ok.errs) != 0 {
		t.Errorf("passing checks: stopped %v, errors %q", ok.stopped, ok.errs)
	}
	for name, f := range map[string]func(TestingT){
		"NoError":         func(t TestingT) { NoError(t, errors.New("e")) },
		"Len":             func(t TestingT) { Len(t, []int{}, 1) },
		"PanicsWithError": func(t TestingT) { PanicsWithError(t, "x", func() {}) },
	} {
		var bad recorder
		f(&bad)
		if !bad.stopped || len(bad.errs) != 1 {
			t.Errorf("%s: stopped %v, errors %q", name, bad.stopped, bad.errs)
		}
	}
}
