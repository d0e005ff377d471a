package promhook_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/promhook"
)

// go test -run '^$' -bench Observe -benchmem ./promhook

func BenchmarkObserve(b *testing.B) {
	m := promhook.New()
	allowed := event(perIP, nethttp.OutcomeAllowed, core.SourceStore, 300*time.Microsecond)
	denied := event(perIP, nethttp.OutcomeDenied, core.SourceDenyCache, time.Microsecond)
	m.Observe(allowed)
	m.Observe(denied)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%4 == 0 {
			m.Observe(denied)
		} else {
			m.Observe(allowed)
		}
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	m := promhook.New()
	events := []nethttp.Event{
		event(perIP, nethttp.OutcomeAllowed, core.SourceStore, 300*time.Microsecond),
		event(perIP, nethttp.OutcomeDenied, core.SourceDenyCache, time.Microsecond),
		event(perKey, nethttp.OutcomeAllowed, core.SourceStore, 300*time.Microsecond),
		event(perKey, nethttp.OutcomeAllowed, core.SourceFallback, 2*time.Microsecond),
	}
	for _, e := range events {
		m.Observe(e)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Observe(events[i%len(events)])
			i++
		}
	})
}
