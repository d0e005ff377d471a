//go:build race

package main

// raceFlags builds the drift check as this test binary was built, so that
// the go command reuses what it compiled for the tests.
var raceFlags = []string{"-race"}
