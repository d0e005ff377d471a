package core

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Algorithm names one of the four rate-limiting algorithms.
type Algorithm uint8

// The four algorithms. The zero Algorithm is invalid: a zero Policy is
// rejected.
const (
	AlgFixedWindow Algorithm = iota + 1
	AlgSlidingWindow
	AlgTokenBucket
	AlgLeakyBucket
)

// String returns the constructor name of the algorithm ("TokenBucket"), as
// used in error messages.
func (a Algorithm) String() string {
	if a >= AlgFixedWindow && a <= AlgLeakyBucket {
		return [...]string{"FixedWindow", "SlidingWindow", "TokenBucket", "LeakyBucket"}[a-AlgFixedWindow]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// Defaults and bounds of the policy knobs, the same in every store
// (Validate).
const (
	DefaultBuckets = 10                     // Buckets of a sliding window without WithBuckets
	MinBucket      = time.Millisecond       // shortest fixed window and sliding-window bucket
	MaxWindowLimit = math.MaxUint32         // largest Limit of a fixed or sliding window
	MaxBuckets     = 4096                   // largest Buckets of a sliding window
	MaxSpan        = time.Duration(1) << 52 // longest Window and Recovery (about 52 days)
)

// maxSpan is MaxSpan in nanoseconds.
const maxSpan = int64(MaxSpan)

// Policy is "Limit requests per Window" plus the knobs of one algorithm.
// Build one with FixedWindow, SlidingWindow, TokenBucket or LeakyBucket and
// refine it with the With methods, which return a modified copy. The
// constructors never fail: a Policy is validated when a limiter is built
// from it (see Validate).
type Policy struct {
	Algorithm Algorithm
	Limit     int64         // unit-cost requests admitted per Window
	Window    time.Duration // the period of the limit
	// Burst is the capacity of a token bucket or the depth of a leaky
	// bucket (the requests it holds at once, the one leaving now included).
	// The constructors set it to Limit.
	Burst   int64
	Buckets int64 // of a sliding window (DefaultBuckets by its constructor)
	// Meter makes a leaky bucket deny overflow instead of delaying (Delay is
	// always 0): it then admits exactly what a token bucket with the same
	// Limit, Window and Burst admits.
	Meter bool
	Name  string // in the IETF RateLimit-Policy header; if empty, the adapter picks one
	parts string // the parts of a policy made with AllOf (encodeParts)
}

// FixedWindow returns a policy admitting at most limit requests in each
// window, with windows aligned to the Unix epoch so that every process agrees
// on the boundaries. It can admit 2*limit across a boundary.
func FixedWindow(limit int64, window time.Duration) Policy {
	return Policy{Algorithm: AlgFixedWindow, Limit: limit, Window: window}
}

// SlidingWindow returns a policy admitting at most limit requests in the
// trailing window, counted in DefaultBuckets buckets (see WithBuckets) that
// drop out whole, so an interval of one window may admit up to
// Policy.MaxInWindow. The window must be a whole number of nanoseconds per
// bucket.
func SlidingWindow(limit int64, window time.Duration) Policy {
	return Policy{Algorithm: AlgSlidingWindow, Limit: limit, Window: window, Buckets: DefaultBuckets}
}

// TokenBucket returns a policy refilling limit tokens per window, continuously,
// into a bucket of capacity limit (see WithBurst).
func TokenBucket(limit int64, window time.Duration) Policy {
	return Policy{Algorithm: AlgTokenBucket, Limit: limit, Window: window, Burst: limit}
}

// LeakyBucket returns a policy letting requests leave at a steady limit per
// window, with up to Burst (default limit) in the bucket: each admitted
// request is told how long to wait (Decision.Delay). AsMeter denies instead.
func LeakyBucket(limit int64, window time.Duration) Policy {
	return Policy{Algorithm: AlgLeakyBucket, Limit: limit, Window: window, Burst: limit}
}

// WithBurst returns a copy of p with the given token-bucket capacity or
// leaky-bucket depth.
func (p Policy) WithBurst(burst int64) Policy { p.Burst = burst; return p }

// WithBuckets returns a copy of p whose sliding window is split into n buckets.
func (p Policy) WithBuckets(n int64) Policy { p.Buckets = n; return p }

// WithName returns a copy of p with the given name (IETF RateLimit-Policy).
func (p Policy) WithName(name string) Policy { p.Name = name; return p }

// AsMeter returns a copy of a leaky-bucket policy that denies overflow
// instead of delaying admitted requests (see Policy.Meter).
func (p Policy) AsMeter() Policy { p.Meter = true; return p }

// Interval is, truncated to the nanosecond, Window/Limit for the bucket
// algorithms (the time one unit takes to come back; Validate rejects a
// truncation that changes the rate by more than 0.1%) and the bucket width
// Window/Buckets for the sliding window; 0 otherwise.
func (p Policy) Interval() time.Duration {
	switch p.Algorithm {
	case AlgTokenBucket, AlgLeakyBucket:
		if p.Limit > 0 {
			return p.Window / time.Duration(p.Limit)
		}
	case AlgSlidingWindow:
		if p.Buckets > 0 {
			return p.Window / time.Duration(p.Buckets)
		}
	}
	return 0
}

// Capacity is the largest cost a single request can ever be admitted with:
// Burst for the bucket algorithms, Limit for the windows, the smallest
// part's for a policy made with AllOf.
func (p Policy) Capacity() int64 {
	if p.parts != "" {
		return partsCapacity(p.parts)
	}
	if p.Algorithm == AlgTokenBucket || p.Algorithm == AlgLeakyBucket {
		return p.Burst
	}
	return p.Limit
}

// MaxInWindow is the most unit-cost requests the policy admits in any
// interval of length Window (its start and end included), whatever the
// traffic and its phase; 0 for an invalid policy. It is the exact bound
// every store keeps:
//
//   - FixedWindow: 2*Limit (at the end of one window and the start of the
//     next).
//   - SlidingWindow: Limit + ceil(Limit/Buckets) (an interval of one Window
//     meets Buckets+1 buckets).
//   - TokenBucket and LeakyBucket: Burst + Window/Interval (Burst + Limit
//     when Window is a multiple of Limit nanoseconds, at most 0.1% more
//     otherwise). A leaky bucket serves its admitted requests one Interval
//     apart.
//
// A policy made with AllOf admits no more than its first part, whose bound
// this is; each part keeps its own.
func (p Policy) MaxInWindow() int64 {
	if p.Validate() != nil {
		return 0
	}
	switch p.Algorithm {
	case AlgFixedWindow:
		return 2 * p.Limit
	case AlgSlidingWindow:
		return p.Limit + ceilDiv(p.Limit, p.Buckets)
	}
	return p.Burst + int64(p.Window/p.Interval())
}

// Recovery is the longest time a key's state matters after any use: an
// idle key older than this is identical to a new one under every policy, so
// evicting it is lossless. It is the time a key needs to return to full
// quota, except for a fixed window: 2*Window, as another policy's window may
// still count its requests. A policy made with AllOf takes its longest
// part's.
func (p Policy) Recovery() time.Duration {
	if p.parts != "" {
		var d time.Duration
		for _, q := range p.Parts() {
			d = max(d, q.Recovery())
		}
		return d
	}
	switch p.Algorithm {
	case AlgTokenBucket, AlgLeakyBucket:
		return time.Duration(p.Burst) * p.Interval()
	case AlgSlidingWindow:
		// The oldest of the Buckets+1 counted buckets (see slidingwindow.go).
		return p.Interval() * time.Duration(p.Buckets+1)
	}
	return 2 * p.Window
}

// Validate reports whether the policy can be run, with an error naming the
// offending field ("core: TokenBucket burst must be > 0, got -1"). Limiters
// call it at construction; it never panics.
func (p Policy) Validate() error {
	a := p.Algorithm
	switch {
	case a < AlgFixedWindow || a > AlgLeakyBucket:
		return fmt.Errorf("core: unknown algorithm %d (build policies with FixedWindow, SlidingWindow, TokenBucket or LeakyBucket)", uint8(a))
	case p.Limit <= 0:
		return fmt.Errorf("core: %v limit must be > 0, got %d", a, p.Limit)
	case p.Window <= 0:
		return fmt.Errorf("core: %v window must be > 0, got %v", a, p.Window)
	case p.Window > MaxSpan:
		return fmt.Errorf("core: %v window must be <= %v (MaxSpan), got %v", a, MaxSpan, p.Window)
	case strings.ContainsFunc(p.Name, func(c rune) bool { return c < 0x20 || c > 0x7e }):
		// A byte outside printable ASCII is a rune outside it (RuneError
		// for invalid UTF-8).
		return fmt.Errorf("core: policy name %q must be printable ASCII (it is sent in the RateLimit-Policy header)", p.Name)
	case p.Meter && a != AlgLeakyBucket:
		return fmt.Errorf("core: meter mode applies to LeakyBucket only, not %v", a)
	case p.parts != "":
		return p.validateParts()
	case a == AlgFixedWindow:
		return p.validateFixedWindow()
	case a == AlgSlidingWindow:
		return p.validateSlidingWindow()
	}
	return p.validateBucket()
}

func (p Policy) validateFixedWindow() error {
	switch {
	case p.Window < MinBucket:
		return fmt.Errorf("core: FixedWindow window must be >= %v, got %v", MinBucket, p.Window)
	case p.Window > MaxSpan/2:
		return fmt.Errorf("core: FixedWindow window must be <= %v (half MaxSpan: its recovery time is two windows), got %v", MaxSpan/2, p.Window)
	case p.Limit > MaxWindowLimit:
		return fmt.Errorf("core: FixedWindow limit must be <= %d, got %d", int64(MaxWindowLimit), p.Limit)
	case p.Limit > maxFixedLimit(p.Window):
		return fmt.Errorf("core: FixedWindow limit %d per %v is too large: a key packs its count and window number into one 64-bit word, which holds at most %d per %v", p.Limit, p.Window, maxFixedLimit(p.Window), p.Window)
	}
	return nil
}

func (p Policy) validateSlidingWindow() error {
	switch {
	case p.Buckets <= 0:
		return fmt.Errorf("core: SlidingWindow buckets must be > 0, got %d", p.Buckets)
	case p.Buckets > MaxBuckets:
		return fmt.Errorf("core: SlidingWindow buckets must be <= %d, got %d", MaxBuckets, p.Buckets)
	case p.Window%time.Duration(p.Buckets) != 0:
		// Otherwise Buckets buckets are shorter than Window, and an
		// interval of one Window can meet Buckets+2 of them.
		return fmt.Errorf("core: SlidingWindow window %v must be a whole number of nanoseconds per bucket (%d buckets)", p.Window, p.Buckets)
	case p.Window/time.Duration(p.Buckets) < MinBucket:
		return fmt.Errorf("core: SlidingWindow bucket (window/buckets = %v/%d) must be >= %v", p.Window, p.Buckets, MinBucket)
	case p.Recovery() > MaxSpan:
		return fmt.Errorf("core: SlidingWindow window %v plus one bucket (its recovery time, %v) must be <= %v (MaxSpan)", p.Window, p.Recovery(), MaxSpan)
	case p.Limit > MaxWindowLimit:
		return fmt.Errorf("core: SlidingWindow limit must be <= %d, got %d", int64(MaxWindowLimit), p.Limit)
	}
	return nil
}

// validateBucket checks a token or leaky bucket. Interval is Window/Limit
// truncated to the nanosecond, which speeds the rate up by (Window mod
// Limit)/Window: at most 0.1% is accepted, so that
// TokenBucket(600_000_000, time.Second) is an error rather than about a
// billion per second.
func (p Policy) validateBucket() error {
	a := p.Algorithm
	hi, lo := bits.Mul64(uint64(p.Burst), uint64(p.Interval()))
	switch {
	case p.Burst <= 0:
		return fmt.Errorf("core: %v burst must be > 0, got %d", a, p.Burst)
	case p.Window < time.Duration(p.Limit):
		return fmt.Errorf("core: %v rate %d per %v is above one request per nanosecond", a, p.Limit, p.Window)
	case int64(p.Window)%p.Limit > int64(p.Window)/1000:
		return fmt.Errorf("core: %v rate %d per %v cannot be kept within 0.1%%: its interval (window/limit) rounds to %v; use a longer window or a limit that divides it", a, p.Limit, p.Window, p.Interval())
	case hi != 0 || lo > uint64(maxSpan):
		return fmt.Errorf("core: %v burst %d at %d per %v takes longer than %v (MaxSpan) to refill", a, p.Burst, p.Limit, p.Window, MaxSpan)
	}
	return nil
}

// Label is the name headers and metrics report the policy by: Name when set,
// otherwise one derived from the policy alone, such as
// "tokenbucket-100-per-60s" (never from anything a client sent); "" for the
// zero Policy, which an event carries when no policy was known. A policy
// made with AllOf without a name is labelled by its parts' labels joined by
// "+".
func (p Policy) Label() string {
	switch {
	case p.Name != "":
		return p.Name
	case p == Policy{}:
		return ""
	case p.parts != "":
		return p.joinParts(Policy.Label, "+")
	}
	w := p.Window.String()
	if p.Window > 0 && p.Window%time.Second == 0 {
		w = strconv.FormatInt(int64(p.Window/time.Second), 10) + "s"
	}
	return strings.ToLower(p.Algorithm.String()) + "-" + strconv.FormatInt(p.Limit, 10) + "-per-" + w
}

// String describes the policy as a person would say it: "TokenBucket 100 per 1m0s burst 20".
func (p Policy) String() string {
	var s string
	if p.parts != "" {
		s = "AllOf(" + p.joinParts(Policy.String, ", ") + ")"
	} else {
		s = fmt.Sprintf("%v %d per %v", p.Algorithm, p.Limit, p.Window)
		switch p.Algorithm {
		case AlgSlidingWindow:
			s += fmt.Sprintf(" in %d buckets", p.Buckets)
		case AlgTokenBucket, AlgLeakyBucket:
			s += fmt.Sprintf(" burst %d", p.Burst)
			if p.Meter {
				s += " (meter)"
			}
		}
	}
	if p.Name != "" {
		s += fmt.Sprintf(" %q", p.Name)
	}
	return s
}

// joinParts joins what f says of each part of a policy made with AllOf
// (Label, String) with sep.
func (p Policy) joinParts(f func(Policy) string, sep string) string {
	var s []string
	for _, q := range p.Parts() {
		s = append(s, f(q))
	}
	return strings.Join(s, sep)
}

// rule is a validated Policy with the numbers its algorithm needs
// precomputed, so the request path does no division it can avoid.
type rule struct {
	policy   Policy
	limit    int64
	window   int64 // ns
	interval int64 // ns: Window/Limit (buckets) or the bucket width (sliding)
	tau      int64 // ns: Burst*interval, the bucket algorithms' tolerance
	buckets  int64 // sliding: B
	ring     int64 // sliding: B+1 counters are kept
	cap2     int64 // sliding: admitted in any B+1 consecutive buckets, Limit + ceil(Limit/B)
	capacity int64 // the largest cost ever admitted: Policy.Capacity
	// fixed window: the count's bits in the packed word (fixedwindow.go)
	countBits uint
	countMask int64
	delay     bool   // leaky bucket that delays (not a meter)
	label     string // policy.Label(), to match the parts of two policies
	// parts are the rules of the parts of a policy made with AllOf, or,
	// for a policy of one part decided by a limiter of such policies, of
	// that one part (see MemoryLimiter.resolve).
	parts []rule
}

func compile(p Policy) (rule, error) {
	if err := p.Validate(); err != nil {
		return rule{}, err
	}
	if p.parts != "" {
		return compileParts(p, p.Parts()), nil
	}
	return compileOne(p), nil
}

// compileParts returns the rule of p, made of parts (a policy of one part
// when parts is p alone), each compiled.
func compileParts(p Policy, parts []Policy) rule {
	r := rule{policy: p, label: p.Label(), capacity: p.Capacity(), parts: make([]rule, len(parts))}
	for i, q := range parts {
		r.parts[i] = compileOne(q)
	}
	r.limit, r.interval = r.parts[0].limit, r.parts[0].interval
	return r
}

// compileOne returns the rule of p, a valid policy of one part.
func compileOne(p Policy) rule {
	r := rule{
		policy:   p,
		label:    p.Label(),
		limit:    p.Limit,
		window:   int64(p.Window),
		interval: int64(p.Interval()),
		buckets:  p.Buckets,
		capacity: p.Capacity(),
		delay:    p.Algorithm == AlgLeakyBucket && !p.Meter,
	}
	switch p.Algorithm {
	case AlgTokenBucket, AlgLeakyBucket:
		r.tau = p.Burst * r.interval
	case AlgSlidingWindow:
		r.ring = p.Buckets + 1
		r.cap2 = p.MaxInWindow()
	case AlgFixedWindow:
		// Every bit the window number leaves: a key moved here from a
		// policy with a larger Limit keeps a count above this one's
		// (see convert).
		r.countBits = 64 - fixedWindowBits(p.Window)
		r.countMask = 1<<r.countBits - 1
	}
	return r
}

// fill completes a verdict into *d with the fields every Decision of this
// rule shares. It is called once, at the top of a call, writing the
// caller's result in place: the verdict, small enough to travel in
// registers, is what passes between the layers below.
func (r *rule) fill(d *Decision, v verdict, parts *verdict, now int64) {
	limit := r.limit
	if parts != nil { // only under a policy made with AllOf (allState.decide)
		limit = r.parts[r.partVerdicts(parts).binding()].limit
		d.parts, d.nparts = parts, uint8(len(r.parts))
	}
	d.Allowed, d.Limit, d.Remaining, d.ResetAfter = v.allowed, limit, v.remaining, v.reset
	if v.allowed {
		d.Delay = v.wait
	} else {
		d.RetryAfter = v.wait
	}
	d.Policy = r.policy
	if now != 0 {
		d.At = time.Unix(0, now).UTC()
	}
}

// fixedWindowBits is how many bits of a fixed-window key's word hold its
// window number: every window of every instant up to the end of int64 Unix
// nanoseconds, plus a sign, so that two window numbers never alias.
func fixedWindowBits(window time.Duration) uint {
	return uint(bits.Len64(uint64(math.MaxInt64/int64(window)))) + 1
}

// maxFixedLimit is the largest count that fits beside the window number.
func maxFixedLimit(window time.Duration) int64 {
	return min(int64(1)<<(64-fixedWindowBits(window))-1, MaxWindowLimit)
}

// ceilDiv divides positive numbers rounding up.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// floorDiv divides rounding toward minus infinity, so that instants before
// the Unix epoch (a test clock) still fall into the right window.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
