// Command demo shows the four rate-limiting algorithms side by side, over
// real HTTP, in about seven seconds. From the repository root:
//
//	go run ./examples/demo
//
// It starts a server on 127.0.0.1 with one endpoint per algorithm, each an
// in-memory limiter (core.New) behind the net/http middleware, all with the
// same limit (10 requests per second by default):
//
//	/fixed    fixed window
//	/sliding  sliding window
//	/token    token bucket
//	/leaky    leaky bucket
//
// Then it sends the same traffic to each, over loopback HTTP:
//
//   - phase 1, a steady overload: twice the limit, for a few windows;
//   - phase 2, after a pause: a burst of one limit's worth just before a
//     window boundary and another just after it (windows are aligned to the
//     Unix epoch, so the demo knows where the boundaries are).
//
// While it runs, one line on stderr shows the progress. At the end it draws,
// per algorithm, the requests admitted (█) and denied (░) in each tenth of a
// window, with a caption saying what to look for, and a summary table. You
// see the fixed window admit twice its limit across a boundary, the sliding
// window refuse to, the token bucket spend its saved burst and then settle
// at its refill rate, and the leaky bucket serve a steady stream whatever
// arrives (it admits a burst, but the middleware holds each request for its
// Decision.Delay before the handler runs).
//
// The output is plain text: without a terminal (a pipe, CI) there are no
// control characters, and progress is a line per phase.
//
// # Flags
//
//	-addr 127.0.0.1:0  listen address; port 0 picks a free port
//	-limit 10          requests per window, for every algorithm
//	-window 1s         the window of the limit
//	-duration 6s       how long the traffic runs, at least 4 windows
//	-serve             keep serving afterwards and print curl commands; Ctrl-C stops
//
// With -serve, try the endpoints yourself and read the rate-limit headers:
//
//	curl -i http://127.0.0.1:PORT/token
package main
