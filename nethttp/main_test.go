package nethttp_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

// TestMain fails the package if the tests leave a goroutine behind (a
// limiter's janitor not closed, a server not shut down, a delay timer's
// waiter).
func TestMain(m *testing.M) { adaptertest.VerifyTestMain(m) }
