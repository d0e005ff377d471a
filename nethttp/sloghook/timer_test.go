package sloghook_test

import (
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/sloghook"
)

// TestSummaryOnTime: with the real clock (here synctest's fake one, which
// drives time.Now and the hook's timer alike), a pending summary is logged
// when it is due, with no request to trigger it, and no timer or goroutine
// is left once nothing is pending. Inside the bubble, time.Sleep moves the
// fake clock and returns at once, and synctest.Wait lets the timer's
// goroutine finish.
func TestSummaryOnTime(t *testing.T) {
	advance := func(d time.Duration) {
		time.Sleep(d)
		synctest.Wait()
	}
	newHook := func() (*sloghook.Hook, *output) {
		out := new(output)
		return sloghook.New(logger(out, slog.LevelDebug)), out
	}
	denied := event(nethttp.OutcomeDenied, perIP)
	summary := func(n, period string) string {
		return `{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":` + n + `,"period":` + period + `}`
	}
	t.Run("logs a summary when it is due, without a request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, out := newHook()
			h.Handle(denied) // logged at once
			advance(10 * time.Second)
			h.Handle(denied)
			h.Handle(denied)
			h.Handle(denied)
			if got := len(out.take()); got != 1 {
				t.Fatalf("lines before the summary: got %d, want 1", got)
			}
			advance(50*time.Second - time.Nanosecond)
			if got := out.take(); got != nil {
				t.Errorf("lines 1ns before the summary is due: got %v, want none", got)
			}
			advance(time.Nanosecond)
			if got, want := out.take(), []string{summary("3", "60000000000")}; !reflect.DeepEqual(got, want) {
				t.Errorf("lines when the summary is due: got %v, want %v", got, want)
			}
			if sloghook.TimerArmed(h) {
				t.Errorf("a timer is armed with nothing pending")
			}
			advance(10 * time.Minute)
			if got := out.take(); got != nil {
				t.Errorf("lines with nothing pending: got %v, want none", got)
			}
		})
	})
	t.Run("logs each group's summary at its own time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, out := newHook()
			failed := failed(nethttp.OutcomeFailedOpen, perIP, 0, errors.New("i/o timeout"))
			h.Handle(failed) // logged at once; its group's summary is due at 60s
			advance(20 * time.Second)
			h.Handle(denied) // logged at once; due at 80s
			h.Handle(denied)
			advance(20 * time.Second)
			h.Handle(failed)
			out.take()
			advance(20 * time.Second) // 60s
			if got, want := len(out.take()), 1; got != want {
				t.Errorf("lines at 60s: got %d, want %d (the failures')", got, want)
			}
			advance(20 * time.Second) // 80s
			if got, want := out.take(), []string{summary("1", "60000000000")}; !reflect.DeepEqual(got, want) {
				t.Errorf("lines at 80s: got %v, want %v", got, want)
			}
		})
	})
	t.Run("Flush logs the pending count and leaves no timer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, out := newHook()
			h.Handle(denied)
			h.Handle(denied)
			if !sloghook.TimerArmed(h) {
				t.Errorf("no timer armed with a summary pending")
			}
			advance(5 * time.Second)
			h.Flush()
			if got, want := out.take(), []string{
				`{"level":"INFO","msg":"ratelimit: requests denied","outcome":"denied","policy":"per-ip","count":1}`,
				summary("1", "5000000000"),
			}; !reflect.DeepEqual(got, want) {
				t.Errorf("lines: got %v, want %v", got, want)
			}
			if sloghook.TimerArmed(h) {
				t.Errorf("a timer is armed after Flush")
			}
			advance(10 * time.Minute)
			if got := out.take(); got != nil {
				t.Errorf("lines after Flush: got %v, want none", got)
			}
		})
	})
}
