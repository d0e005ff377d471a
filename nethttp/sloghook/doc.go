// Package sloghook is a ready-made [nethttp.WithHook] hook that logs what an
// operator of a rate limit needs to a [*slog.Logger], without flooding it
// during an attack:
//
//	logs := sloghook.New(slog.Default())
//	h := nethttp.Middleware(lim, nethttp.WithHook(logs.Handle))
//	defer logs.Flush() // at shutdown: the counts not yet logged
//
// A Hook is safe for concurrent use, and counting an event does not
// allocate. It needs no Close: it keeps no goroutine running, only, while a
// summary is pending, a timer that logs it when due ([Hook.Flush] stops it).
//
// # What is logged
//
// Events are counted in groups: one per outcome and policy (and, for store
// failures, per [core.Source]), never per key. The first event of a group
// that has been quiet for an interval (one minute by default,
// [WithInterval]) is logged at once with count=1. The events that follow
// are only counted, and one summary line with their count is logged when an
// interval has passed since the group's last line, whether or not requests
// come. A group therefore logs at most one line per interval, however many
// requests it sees. [Hook.Flush] logs the pending counts at once.
//
// The default levels, per [nethttp.Outcome] ([WithLevel] changes them):
//
//	denied, dry-run (would deny)      Info
//	failed-open, failed-closed        Error, with the error and the source
//	settle-failed                     Error, with the error and the source
//	key-error, cost-error             Warn, with the error
//	canceled (client gone)            Debug, with the error
//	allowed                           not logged (LevelOff)
//
// Every line has the attributes outcome, policy and count. The policy is
// [core.Policy].Name, or the name nethttp derives for the RateLimit-Policy
// header ("tokenbucket-100-per-60s"); it is left out when no policy is known
// (a failed [nethttp.WithPolicyFunc] lookup, and key and cost errors under
// it). Failures add source ([core.Source], or "none" when the limiter was
// not called: a failed policy lookup). A line logged at once adds error; a
// summary adds period (the time since the group's previous line) and
// last_error.
//
// # Personal data
//
// Keys (client IPs, API keys) are personal data and are never logged by
// default. [WithKeys] adds key (on a summary, last_key: the key of the last
// event counted), for debugging. Error texts are logged as they are: a key
// or cost function of your own must not put personal data in its errors.
package sloghook
