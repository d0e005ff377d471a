package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// middleware stands in for nethttp.Middleware until that package lands.
func middleware(lim core.Limiter) (func(http.Handler) http.Handler, error) {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := lim.AllowN(r.Context(), "demo", 1)
			if err != nil || !d.Allowed {
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int((d.RetryAfter+time.Second-1)/time.Second))))
				http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
				return
			}
			if d.Delay > 0 {
				t := time.NewTimer(d.Delay)
				defer t.Stop()
				select {
				case <-t.C:
				case <-r.Context().Done():
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}
