package core

// The leaky bucket shares the token bucket's one-word state (gcraState): a
// queue in which requests leave one interval (Window/Limit) apart is
// described completely by the time the last admitted request leaves. The
// tolerance tau = Burst intervals is the bucket's depth, so at most Burst
// requests are in it at once, the one leaving now included, and the rest
// overflow.
//
// What differs is what the caller is told: an admitted request gets
// Decision.Delay, the time until it leaves the bucket, and the adapter waits
// that long before serving it, so the output is a steady Limit per Window
// whatever the input. As a meter (Policy.Meter) the delay is not imposed and
// the leaky bucket admits exactly what a token bucket of the same Burst
// admits; the two are the same algorithm seen from two sides.
