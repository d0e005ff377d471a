package script

import (
	"context"
	"embed"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

//go:embed *.lua
var files embed.FS

// Script is the two forms of one limiter's script.
type Script struct{ Keyed, Cross Form }

// Form is one form of a script, as the server runs it.
type Form struct {
	Src string
	sha any // the SHA1 of Src, boxed once so that calls do not box it
}

// crossSlot heads the cross-slot form. The flag needs Redis 7.
const crossSlot = "#!lua flags=allow-cross-slot-keys\n"

// New returns the script of the valid policy p (core.Policy.Validate),
// whose keys expire plus after they would be full (Policy.Recovery): its
// algorithm's file with p's numbers in the header, and those of its parts
// after the first, for a policy made with core.AllOf, so that its calls
// send no policy.
func New(p core.Policy, plus time.Duration) Script {
	parts := p.Parts()
	if parts == nil {
		parts = []core.Policy{p}
	}
	file, own := header(parts[0], plus)
	more := "nil" // one part: no table for the script to build on every call
	if len(parts) > 1 {
		var tables []string
		for _, q := range parts[1:] {
			_, values := header(q, plus)
			tables = append(tables, "{"+strings.Join(values, ", ")+"}")
		}
		more = "{" + strings.Join(tables, ", ") + "}"
	}
	src := withHeader(file, append(own, more))
	return Script{Keyed: newForm(src), Cross: newForm(crossSlot + src)}
}

// header returns the file of p's algorithm and p's values of its header
// (Lua literals), but the last: the parts after the first.
func header(p core.Policy, plus time.Duration) (file string, values []string) {
	file, nums, extra := numbers(p, p.Recovery()+plus)
	for _, x := range nums {
		values = append(values, fmt.Sprint(x))
	}
	return file, append(values, extra)
}

func newForm(src string) Form { return Form{Src: src, sha: redis.NewScript(src).Hash()} }

// withHeader returns the file with values (Lua literals) in place of the
// example values of its header, its first line of code: "local a, b = 1, 2".
func withHeader(file string, values []string) string {
	b, err := files.ReadFile(file)
	if err != nil {
		panic(err) // embedded
	}
	src := string(b)
	i := strings.Index(src, "\nlocal ") + 1
	j := i + strings.IndexByte(src[i:], '\n')
	names, _, _ := strings.Cut(src[i:j], " = ")
	if strings.Count(names, ",")+1 != len(values) {
		panic(fmt.Sprintf("script: %s: %d values for the header %q", file, len(values), names))
	}
	return src[:i] + names + " = " + strings.Join(values, ", ") + src[j:]
}

// numbers returns the file of the valid policy p's algorithm, the K
// numbers that describe p to its script (the header's first, and the
// arguments of a policy given with a call), its keys expiring ttl after
// each write, and the header's last value:
//
//	token and leaky bucket  interval (ns), tau (ns), expiry (ms), 1 if it delays; the expiry as text
//	fixed window            Window in µs and the ns remainder, Limit, expiry (ms), the largest count a conversion keeps; the expiry as text
//	sliding window          bucket width in µs and the ns remainder, Buckets, Limit, cap2, expiry (ms); the ring's struct format
func numbers(p core.Policy, ttl time.Duration) (file string, nums []any, extra string) {
	ttlMs := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	ttlText := "'" + strconv.FormatInt(ttlMs, 10) + "'"
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		interval, delays := int64(p.Interval()), int64(0)
		if p.Algorithm == core.AlgLeakyBucket && !p.Meter {
			delays = 1
		}
		return "gcra.lua", []any{interval, p.Burst * interval, ttlMs, delays}, ttlText
	case core.AlgFixedWindow:
		w := int64(p.Window)
		// The largest count core's one-word state keeps beside the window
		// number (core's maxFixedLimit), so that a conversion keeps the
		// same count in both stores.
		most := min(int64(1)<<(63-bits.Len64(uint64(math.MaxInt64/w)))-1, core.MaxWindowLimit)
		return "fixedwindow.lua", []any{w / 1000, w % 1000, p.Limit, ttlMs, most}, ttlText
	case core.AlgSlidingWindow:
		// core.MaxBuckets bounds the ring, which the script unpacks onto
		// Lua's stack (8000 values): TestMaxBucketsFitLua.
		w := int64(p.Interval())
		return "slidingwindow.lua", []any{w / 1000, w % 1000, p.Buckets, p.Limit, p.MaxInWindow(), ttlMs},
			"'<dddH" + strings.Repeat("I4", int(p.Buckets+1)) + "'"
	}
	panic(fmt.Sprintf("script: unknown algorithm %v of a valid policy", p.Algorithm))
}

// Policy is a policy given with a call, as the scripts receive it, or a
// part of the limiter's own policy, which its script holds (OwnPart).
type Policy struct {
	args []any // its K numbers, boxed once
	own  int   // own part own+1; 0: given
}

// OwnPart returns part j >= 1 (from 0) of the limiter's own policy.
func OwnPart(j int) *Policy { return &Policy{own: j} }

// NewPolicy returns the valid policy p (core.Policy.Validate) for its
// calls' scripts, its keys expiring plus after they would be full
// (Policy.Recovery).
func NewPolicy(p core.Policy, plus time.Duration) *Policy {
	_, nums, _ := numbers(p, p.Recovery()+plus)
	return &Policy{args: nums}
}

// Call is one decision of a script call: what it asks, and the answer.
// Its Part is its key, its policy (nil: the limiter's own) and its answer;
// under a policy made with core.AllOf, the first part's, and More holds
// the others': all are decided at once, a cost admitted only if every
// part admits it, and then charged to each.
type Call struct {
	Part
	N    int64  // the cost; 0 to look (Peek and Get); -1-u to set the usage to u (Set)
	Now  int64  // tests: the script's now, Unix ns; 0: the server's TIME
	More []Part // the other parts, each with a Policy
	// SettleAt, for a settlement, is the instant of the decision settled
	// (Unix ns, not 0), N the units it adds (a debt > 0, a refund < 0),
	// and SettleResets the ResetAfter (ns) that decision gave each row
	// (the call's part, then More's): when its charge was all back.
	SettleAt     int64
	SettleResets []int64
}

// Part is a part of a Call: its key, its policy (never nil after the
// first), its answer.
type Part struct {
	Key    string        // the Redis key
	Policy *Policy       // the policy given with the call
	Res    core.Decision // Allowed, Remaining, ResetAfter, RetryAfter, Delay and At
	Used   int64         // a look: the key's usage; else -1 for a denial the deny cache must not keep
}

// cost is the argument of c's row j: its cost, or a settlement's units,
// instant and the row's reset ('delta at_us at_r reset').
func (c *Call) cost(j int) any {
	if c.SettleAt == 0 {
		return c.N
	}
	reset := int64(0)
	if j < len(c.SettleResets) {
		reset = c.SettleResets[j]
	}
	return strconv.FormatInt(c.N, 10) + " " + strconv.FormatInt(c.SettleAt/1000, 10) + " " + strconv.FormatInt(c.SettleAt%1000, 10) + " " + strconv.FormatInt(reset, 10)
}

// Caller is a Call, or what holds one.
type Caller interface{ ScriptCall() *Call }

// ScriptCall returns c.
func (c *Call) ScriptCall() *Call { return c }

// Command returns the command of one script call of s deciding calls
// (EVALSHA, or EVAL when the server lacks the script), in its keyed or its
// cross-slot form. A fresh one every time: a client hook may keep a
// command after it was answered.
func Command[C Caller](ctx context.Context, s *Script, calls []C, cross, eval bool) *redis.Cmd {
	m, given := rows(calls)
	size := 6 + 2*m
	if len(given) > 0 {
		size += m + len(given)*len(given[0].args)
	}
	f, numKeys := &s.Keyed, m
	if cross {
		f, numKeys = &s.Cross, 0 // the keys are arguments
	}
	args := append(make([]any, 0, size), "evalsha", f.sha, numKeys)
	if eval {
		args[0], args[1] = "eval", f.Src
	}
	for _, cc := range calls {
		c := cc.ScriptCall()
		args = append(args, c.Key)
		for j := range c.More {
			args = append(args, c.More[j].Key)
		}
	}
	for _, cc := range calls {
		c := cc.ScriptCall()
		for cost, j := c.cost(0), 0; j <= len(c.More); j++ {
			if j > 0 && c.SettleAt != 0 {
				cost = c.cost(j)
			}
			args = append(args, cost)
		}
	}
	if len(given) > 0 {
		args = appendPolicies(args, calls, given)
	}
	// E and now only when needed: three arguments fewer for Redis to
	// parse and the script to read on a keyed call at the server's TIME.
	if now := calls[0].ScriptCall().Now; now != 0 {
		args = append(args, len(given), strconv.FormatInt(now/1000, 10), now%1000)
	} else if cross || len(given) > 0 {
		args = append(args, len(given), "", "")
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // a cluster client routes by the first key
	return cmd
}

// rows returns the number of rows of calls (each call's, then its other
// parts') and the distinct policies given with them, usually none.
func rows[C Caller](calls []C) (m int, given []*Policy) {
	add := func(ps *Policy) {
		if ps != nil && ps.own == 0 && !slices.Contains(given, ps) {
			given = append(given, ps)
		}
	}
	for _, cc := range calls {
		c := cc.ScriptCall()
		add(c.Policy)
		for j := range c.More {
			add(c.More[j].Policy)
		}
		m += 1 + len(c.More)
	}
	return m, given
}

// appendPolicies appends the rows' policies (ARGV[m+i]: 0 for the
// limiter's own, e for given[e-1], -e for a part after a call's first,
// -E-j for the own policy's part j+1), then the given policies' numbers.
func appendPolicies[C Caller](args []any, calls []C, given []*Policy) []any {
	for _, cc := range calls {
		c := cc.ScriptCall()
		args = append(args, slices.Index(given, c.Policy)+1)
		for j := range c.More {
			if ps := c.More[j].Policy; ps.own > 0 {
				args = append(args, -len(given)-ps.own)
			} else {
				args = append(args, -1-slices.Index(given, ps))
			}
		}
	}
	for _, ps := range given {
		args = append(args, ps.args...)
	}
	return args
}

// Parse reads a script's reply into its calls' answers.
func Parse[C Caller](v any, calls []C) error {
	m := 0
	for _, c := range calls {
		m += 1 + len(c.ScriptCall().More)
	}
	f, ok := v.(string)
	if !ok || len(f) != 40*m+16 {
		return fmt.Errorf("redisstore: unexpected script reply %T of %d bytes for %d rows", v, len(f), m)
	}
	word := func(i int) int64 { return int64(binary.LittleEndian.Uint64([]byte(f[8*i : 8*i+8]))) }
	at := time.Unix(0, word(5*m)*1000+word(5*m+1)).UTC()
	row := 0
	for _, cc := range calls {
		c := cc.ScriptCall()
		parseRow(word, row, c.N, at, &c.Part)
		for j := range c.More {
			parseRow(word, row+1+j, c.N, at, &c.More[j])
		}
		row += 1 + len(c.More)
	}
	return nil
}

// parseRow reads the answer of row i of a call of cost n into p.
func parseRow(word func(int) int64, i int, n int64, at time.Time, p *Part) {
	r := 5 * i // the row's first word
	p.Res = core.Decision{Allowed: word(r) == 1, Remaining: word(r + 1), At: at,
		ResetAfter: time.Duration(max(word(r+2), 0)), RetryAfter: time.Duration(max(word(r+3), 0))}
	switch fifth := word(r + 4); {
	case n == 0:
		p.Used = fifth // a look: the fifth is the usage, the delay 0
	case fifth < 0:
		p.Used = -1
	default:
		p.Res.Delay = time.Duration(fifth)
	}
}
