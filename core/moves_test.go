package core_test

import "testing"

// TestMoves runs issue 17's four ways around "a change never adds
// capacity" on the in-memory limiter: see coretest.Suite.RunMoves.
func TestMoves(t *testing.T) {
	modelSuite().RunMoves(t)
}
