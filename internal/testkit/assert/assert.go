// Package assert is a dependency-free stand-in for the subset of
// github.com/stretchr/testify/assert that the root module's tests use (see
// package testkit for why). Names, signatures and the meaning of each check
// follow testify v1.11; every function reports a failure with t.Errorf and
// returns whether the check passed.
package assert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// TestingT is what every check needs: *testing.T, *testing.B, testing.TB
// and rapid's T all satisfy it.
type TestingT interface {
	Errorf(format string, args ...any)
}

// helper is testing.TB's Helper. Every check calls it itself, since Helper
// marks the function that calls it.
type helper interface{ Helper() }

// Fail reports a failure: the check's own message, then the caller's
// message (msgAndArgs: a string, or a format string and its arguments).
func Fail(t TestingT, failure string, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if msg := message(msgAndArgs...); msg != "" {
		failure += "\n\tmessages: " + msg
	}
	t.Errorf("\n\t%s", failure)
	return false
}

func message(msgAndArgs ...any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		if s, ok := msgAndArgs[0].(string); ok {
			return s
		}
		return fmt.Sprintf("%+v", msgAndArgs[0])
	default:
		if format, ok := msgAndArgs[0].(string); ok {
			return fmt.Sprintf(format, msgAndArgs[1:]...)
		}
		// Not fmt.Sprint(msgAndArgs...): vet would then take every check
		// for a print wrapper and flag format strings in messages.
		return fmt.Sprintf("%+v", msgAndArgs)
	}
}

// show formats a value for a failure message.
func show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case error:
		return fmt.Sprintf("%T(%q)", v, v.Error())
	case time.Duration, time.Time, fmt.Stringer:
		return fmt.Sprintf("%v (%T)", v, v)
	}
	return fmt.Sprintf("%#v", v)
}

// ObjectsAreEqual reports whether expected and actual are equal: both nil,
// equal []byte, or reflect.DeepEqual (so int(1) and int64(1) differ).
func ObjectsAreEqual(expected, actual any) bool {
	if expected == nil || actual == nil {
		return expected == actual
	}
	exp, ok := expected.([]byte)
	if !ok {
		return reflect.DeepEqual(expected, actual)
	}
	act, ok := actual.([]byte)
	if !ok {
		return false
	}
	if exp == nil || act == nil {
		return exp == nil && act == nil
	}
	return bytes.Equal(exp, act)
}

func isFunc(v any) bool { return v != nil && reflect.TypeOf(v).Kind() == reflect.Func }

// Equal asserts ObjectsAreEqual(expected, actual). Functions are never equal.
func Equal(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if isFunc(expected) || isFunc(actual) {
		return Fail(t, fmt.Sprintf("cannot compare functions: %T and %T", expected, actual), msgAndArgs...)
	}
	if !ObjectsAreEqual(expected, actual) {
		return Fail(t, fmt.Sprintf("not equal:\n\texpected: %s\n\tactual  : %s", show(expected), show(actual)), msgAndArgs...)
	}
	return true
}

// NotEqual asserts !ObjectsAreEqual(expected, actual).
func NotEqual(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if isFunc(expected) || isFunc(actual) {
		return Fail(t, fmt.Sprintf("cannot compare functions: %T and %T", expected, actual), msgAndArgs...)
	}
	if ObjectsAreEqual(expected, actual) {
		return Fail(t, fmt.Sprintf("should not be: %s", show(actual)), msgAndArgs...)
	}
	return true
}

// True asserts that value is true.
func True(t TestingT, value bool, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !value {
		return Fail(t, "should be true", msgAndArgs...)
	}
	return true
}

// False asserts that value is false.
func False(t TestingT, value bool, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if value {
		return Fail(t, "should be false", msgAndArgs...)
	}
	return true
}

func isNil(object any) bool {
	if object == nil {
		return true
	}
	v := reflect.ValueOf(object)
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// Nil asserts that object is nil (a nil interface or a nil pointer, map,
// slice, channel or function inside one).
func Nil(t TestingT, object any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !isNil(object) {
		return Fail(t, "expected nil, got: "+show(object), msgAndArgs...)
	}
	return true
}

// NotNil asserts that object is not nil.
func NotNil(t TestingT, object any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if isNil(object) {
		return Fail(t, "expected a value, got nil", msgAndArgs...)
	}
	return true
}

func isEmpty(object any) bool {
	if object == nil {
		return true
	}
	return isEmptyValue(reflect.ValueOf(object))
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Chan, reflect.Map, reflect.Slice:
		return v.Len() == 0
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		return isEmptyValue(v.Elem())
	}
	return v.IsZero()
}

// Empty asserts that object is nil, "", false, zero, an empty slice, map or
// channel, a pointer to an empty value, or any other zero value.
func Empty(t TestingT, object any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !isEmpty(object) {
		return Fail(t, "should be empty, but was "+show(object), msgAndArgs...)
	}
	return true
}

// NotEmpty asserts !Empty.
func NotEmpty(t TestingT, object any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if isEmpty(object) {
		return Fail(t, "should not be empty, but was "+show(object), msgAndArgs...)
	}
	return true
}

// Zero asserts that i is the zero value of its type (or nil).
func Zero(t TestingT, i any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if i != nil && !ObjectsAreEqual(i, reflect.Zero(reflect.TypeOf(i)).Interface()) {
		return Fail(t, "should be zero, but was "+show(i), msgAndArgs...)
	}
	return true
}

func length(x any) (n int, ok bool) {
	if x == nil {
		return 0, false
	}
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
		return v.Len(), true
	}
	return 0, false
}

// Len asserts that object (array, channel, map, slice or string) has the
// given length.
func Len(t TestingT, object any, n int, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	l, ok := length(object)
	if !ok {
		return Fail(t, fmt.Sprintf("could not take the length of %s", show(object)), msgAndArgs...)
	}
	if l != n {
		return Fail(t, fmt.Sprintf("%s should have %d item(s), but has %d", show(object), n, l), msgAndArgs...)
	}
	return true
}

// contains reports whether list (a string, map, array or slice) contains
// element: a substring, a map key or an element, compared by ObjectsAreEqual.
func contains(list, element any) (ok, found bool) {
	if list == nil {
		return false, false
	}
	v := reflect.ValueOf(list)
	switch v.Kind() {
	case reflect.String:
		e := reflect.ValueOf(element)
		if e.Kind() != reflect.String {
			return false, false
		}
		return true, strings.Contains(v.String(), e.String())
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if ObjectsAreEqual(k.Interface(), element) {
				return true, true
			}
		}
		return true, false
	case reflect.Array, reflect.Slice:
		for i := range v.Len() {
			if ObjectsAreEqual(v.Index(i).Interface(), element) {
				return true, true
			}
		}
		return true, false
	}
	return false, false
}

// Contains asserts that s (a string, map, array or slice) contains element:
// a substring, a key or an element.
func Contains(t TestingT, s, element any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	ok, found := contains(s, element)
	if !ok {
		return Fail(t, fmt.Sprintf("%s could not be searched for %s", show(s), show(element)), msgAndArgs...)
	}
	if !found {
		return Fail(t, fmt.Sprintf("%s does not contain %s", show(s), show(element)), msgAndArgs...)
	}
	return true
}

// NotContains asserts that s (a string, map, array or slice) does not
// contain element.
func NotContains(t TestingT, s, element any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	ok, found := contains(s, element)
	if !ok {
		return Fail(t, fmt.Sprintf("%s could not be searched for %s", show(s), show(element)), msgAndArgs...)
	}
	if found {
		return Fail(t, fmt.Sprintf("%s should not contain %s", show(s), show(element)), msgAndArgs...)
	}
	return true
}

// ElementsMatch asserts that listA and listB (arrays or slices) hold the
// same elements, counting repeats, in any order.
func ElementsMatch(t TestingT, listA, listB any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if isEmpty(listA) && isEmpty(listB) {
		return true
	}
	a, b := reflect.ValueOf(listA), reflect.ValueOf(listB)
	for _, v := range []reflect.Value{a, b} {
		if k := v.Kind(); k != reflect.Array && k != reflect.Slice {
			return Fail(t, fmt.Sprintf("%s is not a list", show(v.Interface())), msgAndArgs...)
		}
	}
	used := make([]bool, b.Len())
	var extraA []any
outer:
	for i := range a.Len() {
		for j := range b.Len() {
			if !used[j] && ObjectsAreEqual(a.Index(i).Interface(), b.Index(j).Interface()) {
				used[j] = true
				continue outer
			}
		}
		extraA = append(extraA, a.Index(i).Interface())
	}
	var extraB []any
	for j := range b.Len() {
		if !used[j] {
			extraB = append(extraB, b.Index(j).Interface())
		}
	}
	if len(extraA) > 0 || len(extraB) > 0 {
		return Fail(t, fmt.Sprintf("elements differ:\n\tonly in A: %#v\n\tonly in B: %#v", extraA, extraB), msgAndArgs...)
	}
	return true
}

// NoError asserts that err is nil.
func NoError(t TestingT, err error, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if err != nil {
		return Fail(t, "unexpected error: "+show(err), msgAndArgs...)
	}
	return true
}

// Error asserts that err is not nil.
func Error(t TestingT, err error, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if err == nil {
		return Fail(t, "an error is expected but got nil", msgAndArgs...)
	}
	return true
}

// EqualError asserts that err is not nil and that its message is errString.
func EqualError(t TestingT, err error, errString string, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if err == nil {
		return Fail(t, fmt.Sprintf("an error %q is expected but got nil", errString), msgAndArgs...)
	}
	if err.Error() != errString {
		return Fail(t, fmt.Sprintf("error message not equal:\n\texpected: %q\n\tactual  : %q", errString, err.Error()), msgAndArgs...)
	}
	return true
}

// ErrorIs asserts errors.Is(err, target).
func ErrorIs(t TestingT, err, target error, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !errors.Is(err, target) {
		return Fail(t, fmt.Sprintf("error is not the target:\n\texpected: %s\n\tin chain: %s", show(target), show(err)), msgAndArgs...)
	}
	return true
}

// ErrorAs asserts errors.As(err, target).
func ErrorAs(t TestingT, err error, target any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if !errors.As(err, target) {
		return Fail(t, fmt.Sprintf("no error in the chain of %s matches %T", show(err), target), msgAndArgs...)
	}
	return true
}

// PanicsWithError asserts that f panics with an error whose message is
// errString.
func PanicsWithError(t TestingT, errString string, f func(), msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	panicked, value := didPanic(f)
	if !panicked {
		return Fail(t, "func should panic", msgAndArgs...)
	}
	err, ok := value.(error)
	if !ok || err.Error() != errString {
		return Fail(t, fmt.Sprintf("func should panic with error %q, panicked with %s", errString, show(value)), msgAndArgs...)
	}
	return true
}

func didPanic(f func()) (panicked bool, value any) {
	panicked = true
	defer func() {
		if panicked {
			value = recover()
		}
	}()
	f()
	panicked = false
	return panicked, value
}

// JSONEq asserts that expected and actual are JSON documents with the same
// content.
func JSONEq(t TestingT, expected, actual string, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	var e, a any
	if err := json.Unmarshal([]byte(expected), &e); err != nil {
		return Fail(t, fmt.Sprintf("expected %q is not valid JSON: %v", expected, err), msgAndArgs...)
	}
	if err := json.Unmarshal([]byte(actual), &a); err != nil {
		return Fail(t, fmt.Sprintf("actual %q is not valid JSON: %v", actual, err), msgAndArgs...)
	}
	if !reflect.DeepEqual(e, a) {
		return Fail(t, fmt.Sprintf("JSON not equal:\n\texpected: %s\n\tactual  : %s", expected, actual), msgAndArgs...)
	}
	return true
}

// Regexp asserts that fmt.Sprint(str) matches rx (a *regexp.Regexp or a
// pattern).
func Regexp(t TestingT, rx, str any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	r, ok := rx.(*regexp.Regexp)
	if !ok {
		var err error
		if r, err = regexp.Compile(fmt.Sprint(rx)); err != nil {
			return Fail(t, fmt.Sprintf("invalid pattern %q: %v", fmt.Sprint(rx), err), msgAndArgs...)
		}
	}
	if !r.MatchString(fmt.Sprint(str)) {
		return Fail(t, fmt.Sprintf("expected %q to match %q", fmt.Sprint(str), r.String()), msgAndArgs...)
	}
	return true
}

func samePointers(a, b any) (ok, same bool) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() != reflect.Pointer || vb.Kind() != reflect.Pointer {
		return false, false
	}
	if va.Type() != vb.Type() {
		return true, false
	}
	return true, va.Pointer() == vb.Pointer()
}

// Same asserts that expected and actual are pointers of one type to the same
// object.
func Same(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	ok, same := samePointers(expected, actual)
	if !ok {
		return Fail(t, fmt.Sprintf("both arguments must be pointers: %T, %T", expected, actual), msgAndArgs...)
	}
	if !same {
		return Fail(t, fmt.Sprintf("not same:\n\texpected: %p %s\n\tactual  : %p %s", expected, show(expected), actual, show(actual)), msgAndArgs...)
	}
	return true
}

// NotSame asserts that expected and actual do not point to the same object.
func NotSame(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	ok, same := samePointers(expected, actual)
	if !ok {
		return Fail(t, fmt.Sprintf("both arguments must be pointers: %T, %T", expected, actual), msgAndArgs...)
	}
	if same {
		return Fail(t, fmt.Sprintf("expected and actual point to the same object: %p %s", expected, show(expected)), msgAndArgs...)
	}
	return true
}

// compare orders two values of the same type: signed and unsigned integers
// (time.Duration included), floats, strings and time.Time.
func compare(a, b any) (c int, ok bool) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if a == nil || b == nil || va.Type() != vb.Type() {
		return 0, false
	}
	if ta, isTime := a.(time.Time); isTime {
		return ta.Compare(b.(time.Time)), true
	}
	switch va.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmp3(va.Int() < vb.Int(), va.Int() > vb.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return cmp3(va.Uint() < vb.Uint(), va.Uint() > vb.Uint()), true
	case reflect.Float32, reflect.Float64:
		return cmp3(va.Float() < vb.Float(), va.Float() > vb.Float()), true
	case reflect.String:
		return strings.Compare(va.String(), vb.String()), true
	}
	return 0, false
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

func order(t TestingT, e1, e2 any, allowed []int, relation string, msgAndArgs []any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	c, ok := compare(e1, e2)
	if !ok {
		return Fail(t, fmt.Sprintf("cannot compare %s and %s (both must be numbers, strings or times of one type)", show(e1), show(e2)), msgAndArgs...)
	}
	for _, a := range allowed {
		if c == a {
			return true
		}
	}
	return Fail(t, fmt.Sprintf("%s is not %s %s", show(e1), relation, show(e2)), msgAndArgs...)
}

// Greater asserts e1 > e2.
func Greater(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	return order(t, e1, e2, []int{1}, "greater than", msgAndArgs)
}

// GreaterOrEqual asserts e1 >= e2.
func GreaterOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	return order(t, e1, e2, []int{1, 0}, "greater than or equal to", msgAndArgs)
}

// Less asserts e1 < e2.
func Less(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	return order(t, e1, e2, []int{-1}, "less than", msgAndArgs)
}

// LessOrEqual asserts e1 <= e2.
func LessOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	return order(t, e1, e2, []int{-1, 0}, "less than or equal to", msgAndArgs)
}

// Positive asserts e > 0.
func Positive(t TestingT, e any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if e == nil {
		return Fail(t, "nil is not positive", msgAndArgs...)
	}
	return order(t, e, reflect.Zero(reflect.TypeOf(e)).Interface(), []int{1}, "greater than", msgAndArgs)
}

// Negative asserts e < 0.
func Negative(t TestingT, e any, msgAndArgs ...any) bool {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if e == nil {
		return Fail(t, "nil is not negative", msgAndArgs...)
	}
	return order(t, e, reflect.Zero(reflect.TypeOf(e)).Interface(), []int{-1}, "less than", msgAndArgs)
}
