package nethttp_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/internal/testkit/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a
// limiter's janitor not closed, a server not shut down, a delay timer).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
