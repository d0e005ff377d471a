package nethttp

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Names of the response header fields the middleware writes, spelled as in
// their specifications. http.Header's Get and Values accept them as they are.
const (
	HeaderLimit           = "X-RateLimit-Limit"     // the policy quota
	HeaderRemaining       = "X-RateLimit-Remaining" // unit-cost requests left now
	HeaderReset           = "X-RateLimit-Reset"     // seconds until the full quota is back (or a Unix time)
	HeaderRetryAfter      = "Retry-After"           // RFC 9110: see HeaderStyle
	HeaderRateLimitPolicy = "RateLimit-Policy"      // draft-ietf-httpapi-ratelimit-headers-11
	HeaderRateLimit       = "RateLimit"             // draft-ietf-httpapi-ratelimit-headers-11
)

// The same names in http.CanonicalHeaderKey form, to set map entries directly:
// h.Set would canonicalise (and allocate) on every request.
const (
	keyLimit      = "X-Ratelimit-Limit"
	keyRemaining  = "X-Ratelimit-Remaining"
	keyReset      = "X-Ratelimit-Reset"
	keyRetryAfter = "Retry-After"
	keyPolicy     = "Ratelimit-Policy"
	keyRateLimit  = "Ratelimit"
)

// HeaderStyle chooses which rate-limit header fields are written.
// Retry-After is written in every style: on a denial, and on a fail-closed
// 503 when the retry time is known (see WithFailClosed).
type HeaderStyle uint8

// HeadersXRateLimit writes X-RateLimit-Limit, -Remaining and -Reset, the
// fields most clients read: the default.
const HeadersXRateLimit HeaderStyle = 0

// HeadersIETF writes RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers-11).
const HeadersIETF HeaderStyle = 1

// HeadersBoth writes the fields of HeadersXRateLimit and of HeadersIETF.
const HeadersBoth HeaderStyle = 2

// HeadersNone writes no rate-limit field (Retry-After still goes on a
// denial).
const HeadersNone HeaderStyle = 3

func (s HeaderStyle) String() string {
	if s.valid() {
		return [...]string{"XRateLimit", "IETF", "Both", "None"}[s]
	}
	return "HeaderStyle(" + strconv.Itoa(int(s)) + ")"
}

func (s HeaderStyle) valid() bool { return s <= HeadersNone }
func (s HeaderStyle) x() bool     { return s == HeadersXRateLimit || s == HeadersBoth }
func (s HeaderStyle) ietf() bool  { return s == HeadersIETF || s == HeadersBoth }

// renderer turns decisions into header values. It caches the strings that
// depend only on the policy.
type renderer struct {
	style     HeaderStyle
	resetUnix bool

	policy     core.Policy // the policy the cache below describes
	limit      string      // strconv of policy.Limit
	name       string      // policy name as an sf-string, quotes included
	parts      []string    // for a policy made with core.AllOf, its parts' names
	policyItem string      // the RateLimit-Policy list members: one, or a part's each
}

// newRenderer returns a renderer for decisions of p.
func newRenderer(p core.Policy, style HeaderStyle, resetUnix bool) renderer {
	rd := renderer{
		style:     style,
		resetUnix: resetUnix,
		policy:    p,
		limit:     strconv.FormatInt(p.Limit, 10),
		name:      sfString(p.Label()),
	}
	rd.policyItem = policyItem(rd.name, p)
	if parts := p.Parts(); parts != nil {
		items := make([]string, len(parts))
		for i, q := range parts {
			rd.parts = append(rd.parts, sfString(q.Label()))
			items[i] = policyItem(rd.parts[i], q)
		}
		rd.policyItem = strings.Join(items, ", ")
	}
	return rd
}

// maxRenderers bounds the renderers an engine keeps for policies other than
// its limiter's own (per-request policies, WithPolicyFunc): beyond it, a
// renderer is built for each request that needs one.
const maxRenderers = 256

// rendererFor returns the renderer for decisions of p: the engine's own for
// the limiter's policy (and, with HeadersNone, for any: it writes only
// Retry-After), otherwise one kept in a sync.Map, which requests read
// without a lock, built at the first request under p.
func (e *Engine) rendererFor(p *core.Policy) *renderer {
	if e.render.style == HeadersNone || *p == e.render.policy {
		return &e.render
	}
	if rd, ok := e.renders.Load(*p); ok {
		return rd.(*renderer)
	}
	rd := newRenderer(*p, e.render.style, e.render.resetUnix)
	if e.nrenders.Add(1) > maxRenderers {
		return &rd // full: the count stays above the bound, and nothing more is kept
	}
	kept, loaded := e.renders.LoadOrStore(*p, &rd)
	if loaded {
		e.nrenders.Add(-1)
	}
	return kept.(*renderer)
}

// write sets the header fields for d, a decision of rd.policy (see
// Engine.rendererFor; with HeadersNone, any renderer writes Retry-After).
// deny says whether d is the denial the request is answered with: the
// caller passes false for an admission and for a dry-run denial, which is
// served, and so must neither tell the client to come back later nor take
// the X-RateLimit-* fields from a tighter limit.
func (rd *renderer) write(h http.Header, d *core.Decision, deny bool) {
	if !d.Allowed && d.RetryAfter <= 0 {
		// A denial of a cost above capacity: the key's state is beside the
		// point (and unknown to a store that failed), so what is known of
		// the limit, never Remaining or Reset. When it is the answer
		// (deny), Retry-After goes (waiting cannot end this denial,
		// whatever an earlier writer left), and so do an outer limit's
		// X-RateLimit-* fields, which describe another limit.
		if deny {
			delete(h, keyRetryAfter)
			delete(h, keyLimit)
			delete(h, keyRemaining)
			delete(h, keyReset)
		}
		rd.writeKnown(h, d.Limit)
		return
	}
	x, ietf := rd.style.x(), rd.style.ietf()
	var reset int64
	if x {
		reset = rd.resetValue(d.ResetAfter)
		// The limit that denies is the one the 429 is about, even if an
		// outer limit that admitted shows fewer requests remaining (its
		// Remaining counts unit requests; this denial may be for a cost
		// above its own Remaining) or the same number with a later reset.
		x = deny || moreRestrictive(h, d.Remaining, reset)
	}
	if x || deny || ietf {
		rd.set(h, d, reset, x, deny, ietf)
	}
}

// set sets the fields write chose: X-RateLimit-* (x, with reset),
// Retry-After (retry), RateLimit-Policy and RateLimit (ietf). First every
// value that is not cached goes into one buffer, which becomes one string
// whose substrings are those values; then one slice backs all the values,
// each header a one-element window of it: two allocations, whatever the
// style.
func (rd *renderer) set(h http.Header, d *core.Decision, reset int64, x, retry, ietf bool) {
	var buf [96]byte
	b := buf[:0]
	var keys [6]string // the fields to set, in order, and their values
	var vals [6]value
	n := 0
	if x {
		keys[0], keys[1], keys[2] = keyLimit, keyRemaining, keyReset
		vals[0] = value{s: rd.limit}
		if d.Limit != rd.policy.Limit {
			b, vals[0] = number(b, d.Limit)
		}
		b, vals[1] = number(b, d.Remaining)
		b, vals[2] = number(b, reset)
		n = 3
	}
	if retry {
		keys[n] = keyRetryAfter
		b, vals[n] = number(b, max(ceilSeconds(d.RetryAfter), 1))
		n++
	}
	if ietf {
		keys[n], keys[n+1] = keyPolicy, keyRateLimit
		b, vals[n] = rd.policyMember(b, h)
		i := len(b)
		b = appendMembers(b, h[keyRateLimit])
		b = rd.appendRateLimit(b, d)
		vals[n+1] = value{i: i, j: len(b)}
		n += 2
	}
	s := string(b) // "" without an allocation when b is empty
	all := make([]string, n)
	for i := range all {
		all[i] = vals[i].in(s)
		h[keys[i]] = all[i : i+1 : i+1]
	}
}

// appendRateLimit appends d's RateLimit members to b: one, or for a policy
// made with core.AllOf each part's (if d reports its parts), with the
// part's own r and t.
func (rd *renderer) appendRateLimit(b []byte, d *core.Decision) []byte {
	parts := d.Parts() // nil for a policy of one part
	if len(parts) != len(rd.parts) || len(parts) == 0 {
		return appendMember(b, rd.name, d.Remaining, d.ResetAfter)
	}
	for i, q := range parts {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendMember(b, rd.parts[i], q.Remaining, q.ResetAfter)
	}
	return b
}

// appendMember appends one RateLimit member: `"name";r=0;t=6`.
func appendMember(b []byte, name string, remaining int64, reset time.Duration) []byte {
	b = append(b, name...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(reset), 10)
}

// writeKnown sets what is known of a limit whose decision is not (the
// limiter failed, or the cost is above capacity): X-RateLimit-Limit, unless
// an outer limit has set its own, complete fields, and this policy's member
// of RateLimit-Policy. Never Remaining, Reset or the RateLimit field, which
// would be guesses.
func (rd *renderer) writeKnown(h http.Header, limit int64) {
	if rd.style.x() && len(h[keyLimit]) == 0 {
		v := rd.limit
		if limit != rd.policy.Limit {
			v = strconv.FormatInt(limit, 10)
		}
		h[keyLimit] = []string{v}
	}
	if rd.style.ietf() {
		b, v := rd.policyMember(nil, h)
		h[keyPolicy] = []string{v.in(string(b))}
	}
}

// policyMember is the RateLimit-Policy value: this policy's member, after
// those of outer limits already in h, if any, appended to b. Several
// policies on one request are listed together, none overwritten.
func (rd *renderer) policyMember(b []byte, h http.Header) ([]byte, value) {
	old := h[keyPolicy]
	if len(old) == 0 {
		return b, value{s: rd.policyItem}
	}
	i := len(b)
	b = append(appendMembers(b, old), rd.policyItem...)
	return b, value{i: i, j: len(b)}
}

// appendMembers appends to b the lines of a structured-field list already
// in the response, each followed by ", ", for one more member to follow.
func appendMembers(b []byte, lines []string) []byte {
	for _, l := range lines {
		b = append(b, l...)
		b = append(b, ", "...)
	}
	return b
}

// value is one header value: a ready string, or the span [i, j) of the
// rendered buffer.
type value struct {
	s    string
	i, j int
}

// number appends n to b.
func number(b []byte, n int64) ([]byte, value) {
	i := len(b)
	b = strconv.AppendInt(b, n, 10)
	return b, value{i: i, j: len(b)}
}

// in returns the value, taking it from the rendered buffer s if it is there.
func (v value) in(s string) string {
	if v.s != "" {
		return v.s
	}
	return s[v.i:v.j]
}

// moreRestrictive reports whether an admission (or dry-run denial) with
// remaining and reset should replace the X-RateLimit-* fields already in h
// (set by an outer limit on the same request): fewer requests remaining
// wins, and on a tie the later reset. Fields that are absent or not numbers
// are replaced. A denial does not ask: it always replaces them.
func moreRestrictive(h http.Header, remaining, reset int64) bool {
	oldRem, ok := headerInt(h, keyRemaining)
	if !ok {
		return true
	}
	oldReset, ok := headerInt(h, keyReset)
	return !ok || remaining < oldRem || remaining == oldRem && reset > oldReset
}

func headerInt(h http.Header, key string) (int64, bool) {
	v := h[key]
	if len(v) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	return n, err == nil
}

// resetValue is X-RateLimit-Reset for a reset d from now: d in seconds, or
// with WithResetAsUnixTime the Unix time then, both rounded up.
func (rd *renderer) resetValue(d time.Duration) int64 {
	if rd.resetUnix {
		return ceilSeconds(time.Duration(time.Now().Add(d).UnixNano()))
	}
	return ceilSeconds(d)
}

// ceilSeconds is d in whole seconds, rounded up: a client that waits that long
// is never early. 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// policyItem is p as one RateLimit-Policy list member: `"name";q=100;w=60`.
// The window is in whole seconds rounded up, at least 1, as the draft's w
// parameter cannot say less.
func policyItem(name string, p core.Policy) string {
	w := max(ceilSeconds(p.Window), 1)
	return name + ";q=" + strconv.FormatInt(p.Limit, 10) + ";w=" + strconv.FormatInt(w, 10)
}

// checkPolicyName reports whether the names of p and of its parts can be
// sent as structured-field strings (RFC 9651: printable ASCII).
func checkPolicyName(p core.Policy) error {
	err := checkName(p.Name)
	for _, q := range p.Parts() {
		err = cmp.Or(err, checkName(q.Name))
	}
	return err
}

func checkName(name string) error {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("policy name %q cannot be sent in a header: use printable ASCII only", name)
		}
	}
	return nil
}

// sfString quotes s as an RFC 9651 sf-string, escaping '"' and '\'. Bytes an
// sf-string cannot hold become '?' (constructors and WithPolicyFunc reject
// such names; this only guards decisions from a store under a policy the
// engine was given by neither).
func sfString(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	b = append(b, '"')
	return string(b)
}
