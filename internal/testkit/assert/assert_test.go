package assert

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// recorder is a TestingT that records failures.
type recorder struct{ msgs []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

type myErr struct{ s string }

func (e *myErr) Error() string { return e.s }

// TestChecks runs every check once where it must pass and once where it must
// fail, and checks that it says so and reports exactly the failures.
func TestChecks(t *testing.T) {
	x, y := 1, 1
	wrapped := fmt.Errorf("wrap: %w", fs.ErrNotExist)
	var me *myErr
	var nilPtr *int
	cases := []struct {
		name string
		pass func(TestingT) bool
		fail func(TestingT) bool
	}{
		{"Equal", func(t TestingT) bool { return Equal(t, []int{1}, []int{1}) }, func(t TestingT) bool { return Equal(t, 1, int64(1)) }},
		{"Equal bytes", func(t TestingT) bool { return Equal(t, []byte("a"), []byte("a")) }, func(t TestingT) bool { return Equal(t, []byte{}, []byte(nil)) }},
		{"Equal nil", func(t TestingT) bool { return Equal(t, nil, nil) }, func(t TestingT) bool { return Equal(t, nil, nilPtr) }},
		{"Equal func", func(t TestingT) bool { return Equal(t, "a", "a") }, func(t TestingT) bool { return Equal(t, func() {}, nil) }},
		{"NotEqual", func(t TestingT) bool { return NotEqual(t, 1, 2) }, func(t TestingT) bool { return NotEqual(t, "a", "a") }},
		{"True", func(t TestingT) bool { return True(t, true) }, func(t TestingT) bool { return True(t, false) }},
		{"False", func(t TestingT) bool { return False(t, false) }, func(t TestingT) bool { return False(t, true) }},
		{"Nil", func(t TestingT) bool { return Nil(t, nilPtr) }, func(t TestingT) bool { return Nil(t, &x) }},
		{"NotNil", func(t TestingT) bool { return NotNil(t, &x) }, func(t TestingT) bool { return NotNil(t, map[string]int(nil)) }},
		{"Empty", func(t TestingT) bool {
			return Empty(t, http.Header{}) && Empty(t, "") && Empty(t, 0) && Empty(t, nil) && Empty(t, new(int)) && Empty(t, time.Duration(0))
		}, func(t TestingT) bool { return Empty(t, []int{0}) }},
		{"NotEmpty", func(t TestingT) bool { return NotEmpty(t, "a") }, func(t TestingT) bool { return NotEmpty(t, struct{ a int }{}) }},
		{"Zero", func(t TestingT) bool { return Zero(t, time.Duration(0)) && Zero(t, nil) && Zero(t, "") }, func(t TestingT) bool { return Zero(t, []int{}) }},
		{"Len", func(t TestingT) bool { return Len(t, "abc", 3) && Len(t, map[int]int{1: 1}, 1) }, func(t TestingT) bool { return Len(t, []int{1}, 2) }},
		{"Len of a non-container", func(t TestingT) bool { return Len(t, [2]int{}, 2) }, func(t TestingT) bool { return Len(t, 5, 0) }},
		{"Contains", func(t TestingT) bool {
			return Contains(t, "hello", "ell") && Contains(t, []string{"a", "b"}, "b") && Contains(t, http.Header{"X-A": nil}, "X-A")
		}, func(t TestingT) bool { return Contains(t, []int{1}, int64(1)) }},
		{"Contains in a non-container", func(t TestingT) bool { return Contains(t, [1]int{7}, 7) }, func(t TestingT) bool { return Contains(t, 7, 7) }},
		{"NotContains", func(t TestingT) bool { return NotContains(t, "hello", "z") }, func(t TestingT) bool { return NotContains(t, "hello", "h") }},
		{"ElementsMatch", func(t TestingT) bool {
			return ElementsMatch(t, []int{1, 2, 2}, []int{2, 1, 2}) && ElementsMatch(t, []int{}, nil)
		}, func(t TestingT) bool { return ElementsMatch(t, []int{1, 2, 2}, []int{1, 1, 2}) }},
		{"NoError", func(t TestingT) bool { return NoError(t, nil) }, func(t TestingT) bool { return NoError(t, errors.New("x")) }},
		{"Error", func(t TestingT) bool { return Error(t, errors.New("x")) }, func(t TestingT) bool { return Error(t, nil) }},
		{"EqualError", func(t TestingT) bool { return EqualError(t, errors.New("x"), "x") }, func(t TestingT) bool { return EqualError(t, nil, "x") }},
		{"EqualError message", func(t TestingT) bool { return true }, func(t TestingT) bool { return EqualError(t, errors.New("y"), "x") }},
		{"ErrorIs", func(t TestingT) bool { return ErrorIs(t, wrapped, fs.ErrNotExist) }, func(t TestingT) bool { return ErrorIs(t, wrapped, fs.ErrExist) }},
		{"ErrorAs", func(t TestingT) bool { return ErrorAs(t, fmt.Errorf("w: %w", &myErr{"m"}), &me) && me.s == "m" }, func(t TestingT) bool { return ErrorAs(t, wrapped, &me) }},
		{"PanicsWithError", func(t TestingT) bool { return PanicsWithError(t, "boom", func() { panic(errors.New("boom")) }) }, func(t TestingT) bool { return PanicsWithError(t, "boom", func() {}) }},
		{"PanicsWithError value", func(t TestingT) bool { return true }, func(t TestingT) bool { return PanicsWithError(t, "boom", func() { panic("boom") }) }},
		{"JSONEq", func(t TestingT) bool { return JSONEq(t, `{"a":1,"b":[1,2]}`, `{"b":[1,2], "a":1.0}`) }, func(t TestingT) bool { return JSONEq(t, `{"a":1}`, `{"a":2}`) }},
		{"Regexp", func(t TestingT) bool { return Regexp(t, regexp.MustCompile(`^a+$`), "aaa") && Regexp(t, `\d`, 42) }, func(t TestingT) bool { return Regexp(t, `^b`, "abc") }},
		{"Same", func(t TestingT) bool { return Same(t, &x, &x) }, func(t TestingT) bool { return Same(t, &x, &y) }},
		{"Same non-pointers", func(t TestingT) bool { return true }, func(t TestingT) bool { return Same(t, x, x) }},
		{"NotSame", func(t TestingT) bool { return NotSame(t, &x, &y) }, func(t TestingT) bool { return NotSame(t, &x, &x) }},
		{"Greater", func(t TestingT) bool { return Greater(t, 2, 1) && Greater(t, "b", "a") }, func(t TestingT) bool { return Greater(t, 1, 1) }},
		{"GreaterOrEqual", func(t TestingT) bool { return GreaterOrEqual(t, uint8(1), uint8(1)) }, func(t TestingT) bool { return GreaterOrEqual(t, 0.5, 1.5) }},
		{"Less", func(t TestingT) bool { return Less(t, time.Second, time.Minute) }, func(t TestingT) bool { return Less(t, int64(2), int64(1)) }},
		{"Less mixed types", func(t TestingT) bool { return true }, func(t TestingT) bool { return Less(t, 1, int64(2)) }},
		{"LessOrEqual", func(t TestingT) bool { return LessOrEqual(t, time.Unix(1, 0), time.Unix(1, 0)) }, func(t TestingT) bool { return LessOrEqual(t, 3, 2) }},
		{"Positive", func(t TestingT) bool { return Positive(t, time.Nanosecond) }, func(t TestingT) bool { return Positive(t, 0) }},
		{"Negative", func(t TestingT) bool { return Negative(t, -1.5) }, func(t TestingT) bool { return Negative(t, uint(0)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ok, bad recorder
			if !c.pass(&ok) || len(ok.msgs) != 0 {
				t.Errorf("passing case failed: %q", ok.msgs)
			}
			if c.fail(&bad) || len(bad.msgs) != 1 {
				t.Errorf("failing case: %d failures reported, want 1: %q", len(bad.msgs), bad.msgs)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	var r recorder
	Equal(&r, 1, 2, "key %d of %s", 7, "k")
	Equal(&r, 1, 2, "plain")
	if len(r.msgs) != 2 || !strings.Contains(r.msgs[0], "key 7 of k") || !strings.Contains(r.msgs[1], "plain") ||
		!strings.Contains(r.msgs[0], "expected: 1") || !strings.Contains(r.msgs[0], "actual  : 2") {
		t.Errorf("messages: %q", r.msgs)
	}
}
