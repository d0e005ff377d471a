// Package sloghook is a ready-made [nethttp.WithHook] hook that logs what an
// operator of a rate limit needs to a [*slog.Logger], without flooding it
// during an attack:
//
//	logs := sloghook.New(slog.Default())
//	h := nethttp.Middleware(lim, nethttp.WithHook(logs.Handle))
//	defer logs.Flush() // at shutdown: the counts not yet logged
//
// # What is logged
//
// Events are counted in groups: one per outcome and policy (and, for store
// failures, per [core.Source]), never per key. The first event of a group
// that has been quiet for an interval (one minute by default,
// [WithInterval]) is logged at once with count=1, so that an operator sees a
// new problem immediately. The events that follow are only counted; the
// first hook call (of any request) once an interval has passed since the
// group's last line logs one summary line with their count and the period
// it covers. A group therefore logs at most one line per interval, however
// many requests it sees, and a flood of denials is one line a minute.
// [Hook.Flush] logs the pending counts at once. With per-request policies
// ([nethttp.WithPolicyFunc]) there is a group per policy in use.
//
// The default levels, per [nethttp.Outcome] ([WithLevel] changes them):
//
//	denied, dry-run (would deny)      Info
//	failed-open, failed-closed        Error, with the error and the source
//	key-error, cost-error             Warn, with the error
//	canceled (client gone)            Debug, with the error
//	allowed                           not logged (LevelOff)
//
// Every line has the attributes outcome, policy and count. The policy is
// [core.Policy].Name, or the name nethttp derives for the RateLimit-Policy
// header, such as "tokenbucket-100-per-60s"; it is left out when no policy
// is known (a failed [nethttp.WithPolicyFunc] lookup, and key and cost
// errors under it, as the lookup needs the key).
// Failures add source. A line logged at once adds error; a summary adds
// period (the time since the group's previous line) and last_error (the
// last error counted).
//
// # Personal data
//
// Keys (client IPs, API keys) are personal data and are never logged by
// default. [WithKeys] adds key (on a summary, last_key: the key of the last
// event counted), for debugging. Error texts are logged as they are: a key
// or cost function of your own must not put personal data in its errors.
//
// # Concurrency
//
// A Hook is safe for simultaneous use by multiple goroutines: hooks run on
// the requests' goroutines. It starts no goroutine, so it needs no Close:
// lines are written by the hook calls themselves, outside its lock. Counting
// an event does not allocate.
package sloghook
