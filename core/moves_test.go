package core_test

import (
	"testing"
	"time"
)

// Issue 17's four ways around "a change never adds capacity", on the
// in-memory limiter: see the scenarios in package coretest.

func TestSlidingWindowMovedToFewerBucketsKeepsItsOldestBucket(t *testing.T) {
	modelSuite().SlidingWindowMovedToFewerBuckets(t, 10*time.Second)
}

func TestFixedWindowMovedToAShorterWindowCountsTheWindowJustEnded(t *testing.T) {
	modelSuite().FixedWindowMovedToAShorterWindow(t)
}

func TestTokenBucketMovedToAVerySlowPlanNeverWraps(t *testing.T) {
	modelSuite().TokenBucketMovedToAVerySlowPlan(t)
}

func TestLeakyBucketMovedToAFasterPlanServesItsQueueFirst(t *testing.T) {
	modelSuite().LeakyBucketMovedToAFasterPlan(t)
}
