// Package require is a dependency-free stand-in for the subset of
// github.com/stretchr/testify/require that the root module's tests use (see
// package testkit for why): each function is the check of the same name in
// package assert, and stops the test with t.FailNow when it fails.
package require

import "github.com/go-ratelimit/ratelimit/internal/testkit/assert"

// TestingT is what every check needs: *testing.T, *testing.B, testing.TB
// and rapid's T all satisfy it.
type TestingT interface {
	Errorf(format string, args ...any)
	FailNow()
}

type helper interface{ Helper() }

// Equal requires ObjectsAreEqual(expected, actual). Functions are never equal.
func Equal(t TestingT, expected, actual any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Equal(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// NotEqual requires !ObjectsAreEqual(expected, actual).
func NotEqual(t TestingT, expected, actual any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.NotEqual(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// True requires that value is true.
func True(t TestingT, value bool, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.True(t, value, msgAndArgs...) {
		t.FailNow()
	}
}

// False requires that value is false.
func False(t TestingT, value bool, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.False(t, value, msgAndArgs...) {
		t.FailNow()
	}
}

// Nil requires that object is nil (a nil interface or a nil pointer, map,
// slice, channel or function inside one).
func Nil(t TestingT, object any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Nil(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// NotNil requires that object is not nil.
func NotNil(t TestingT, object any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.NotNil(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// Empty requires that object is nil, "", false, zero, an empty slice, map or
// channel, a pointer to an empty value, or any other zero value.
func Empty(t TestingT, object any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Empty(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// NotEmpty requires !Empty.
func NotEmpty(t TestingT, object any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.NotEmpty(t, object, msgAndArgs...) {
		t.FailNow()
	}
}

// Zero requires that i is the zero value of its type (or nil).
func Zero(t TestingT, i any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Zero(t, i, msgAndArgs...) {
		t.FailNow()
	}
}

// Len requires that object (array, channel, map, slice or string) has the
// given length.
func Len(t TestingT, object any, n int, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Len(t, object, n, msgAndArgs...) {
		t.FailNow()
	}
}

// Contains requires that s (a string, map, array or slice) contains element:
// a substring, a key or an element.
func Contains(t TestingT, s, element any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Contains(t, s, element, msgAndArgs...) {
		t.FailNow()
	}
}

// NotContains requires that s (a string, map, array or slice) does not
// contain element.
func NotContains(t TestingT, s, element any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.NotContains(t, s, element, msgAndArgs...) {
		t.FailNow()
	}
}

// ElementsMatch requires that listA and listB (arrays or slices) hold the
// same elements, counting repeats, in any order.
func ElementsMatch(t TestingT, listA, listB any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.ElementsMatch(t, listA, listB, msgAndArgs...) {
		t.FailNow()
	}
}

// NoError requires that err is nil.
func NoError(t TestingT, err error, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.NoError(t, err, msgAndArgs...) {
		t.FailNow()
	}
}

// Error requires that err is not nil.
func Error(t TestingT, err error, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Error(t, err, msgAndArgs...) {
		t.FailNow()
	}
}

// EqualError requires that err is not nil and that its message is errString.
func EqualError(t TestingT, err error, errString string, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.EqualError(t, err, errString, msgAndArgs...) {
		t.FailNow()
	}
}

// ErrorIs requires errors.Is(err, target).
func ErrorIs(t TestingT, err, target error, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.ErrorIs(t, err, target, msgAndArgs...) {
		t.FailNow()
	}
}

// ErrorAs requires errors.As(err, target).
func ErrorAs(t TestingT, err error, target any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.ErrorAs(t, err, target, msgAndArgs...) {
		t.FailNow()
	}
}

// JSONEq requires that expected and actual are JSON documents with the same
// content.
func JSONEq(t TestingT, expected, actual string, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.JSONEq(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// Regexp requires that fmt.Sprint(str) matches rx (a *regexp.Regexp or a
// pattern).
func Regexp(t TestingT, rx, str any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Regexp(t, rx, str, msgAndArgs...) {
		t.FailNow()
	}
}

// Same requires that expected and actual are pointers of one type to the same
// object.
func Same(t TestingT, expected, actual any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Same(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// NotSame requires that expected and actual do not point to the same object.
func NotSame(t TestingT, expected, actual any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.NotSame(t, expected, actual, msgAndArgs...) {
		t.FailNow()
	}
}

// Greater requires e1 > e2.
func Greater(t TestingT, e1, e2 any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Greater(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// GreaterOrEqual requires e1 >= e2.
func GreaterOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.GreaterOrEqual(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// Less requires e1 < e2.
func Less(t TestingT, e1, e2 any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Less(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// LessOrEqual requires e1 <= e2.
func LessOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.LessOrEqual(t, e1, e2, msgAndArgs...) {
		t.FailNow()
	}
}

// Positive requires e > 0.
func Positive(t TestingT, e any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Positive(t, e, msgAndArgs...) {
		t.FailNow()
	}
}

// Negative requires e < 0.
func Negative(t TestingT, e any, msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.Negative(t, e, msgAndArgs...) {
		t.FailNow()
	}
}

// PanicsWithError requires that f panics with an error whose message is
// errString.
func PanicsWithError(t TestingT, errString string, f func(), msgAndArgs ...any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !assert.PanicsWithError(t, errString, f, msgAndArgs...) {
		t.FailNow()
	}
}
