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

// New returns the script of policy p, whose keys expire ttl after each
// write: its algorithm's file with p's numbers in the header.
func New(p core.Policy, ttl time.Duration) (Script, error) {
	file, nums, extra, err := numbers(p, ttl)
	if err != nil {
		return Script{}, err
	}
	values := make([]string, 0, len(nums)+1)
	for _, x := range nums {
		values = append(values, strconv.FormatInt(x, 10))
	}
	src := withHeader(file, append(values, extra))
	return Script{Keyed: newForm(src), Cross: newForm(crossSlot + src)}, nil
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
func numbers(p core.Policy, ttl time.Duration) (file string, nums []int64, extra string, err error) {
	ttlMs := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	ttlText := "'" + strconv.FormatInt(ttlMs, 10) + "'"
	switch p.Algorithm {
	case core.AlgTokenBucket, core.AlgLeakyBucket:
		interval, delays := int64(p.Interval()), int64(0)
		if p.Algorithm == core.AlgLeakyBucket && !p.Meter {
			delays = 1
		}
		return "gcra.lua", []int64{interval, p.Burst * interval, ttlMs, delays}, ttlText, nil
	case core.AlgFixedWindow:
		w := int64(p.Window)
		// The largest count core's one-word state keeps beside the window
		// number (core's maxFixedLimit), so that a conversion keeps the
		// same count in both stores.
		most := min(int64(1)<<(63-bits.Len64(uint64(math.MaxInt64/w)))-1, core.MaxWindowLimit)
		return "fixedwindow.lua", []int64{w / 1000, w % 1000, p.Limit, ttlMs, most}, ttlText, nil
	case core.AlgSlidingWindow:
		// core.MaxBuckets bounds the ring, which the script unpacks onto
		// Lua's stack (8000 values): TestMaxBucketsFitLua.
		w := int64(p.Interval())
		return "slidingwindow.lua", []int64{w / 1000, w % 1000, p.Buckets, p.Limit, p.MaxInWindow(), ttlMs},
			"'<dddH" + strings.Repeat("I4", int(p.Buckets+1)) + "'", nil
	}
	return "", nil, "", fmt.Errorf("redisstore: unknown algorithm %v", p.Algorithm)
}

// Policy is a policy given with a call, as the scripts receive it.
type Policy struct{ args []any } // its K numbers, boxed once

// NewPolicy returns the valid policy p for its calls' scripts, its keys
// expiring ttl after each write.
func NewPolicy(p core.Policy, ttl time.Duration) (*Policy, error) {
	_, nums, _, err := numbers(p, ttl)
	if err != nil {
		return nil, err
	}
	ps := &Policy{args: make([]any, len(nums))}
	for i, x := range nums {
		ps.args[i] = x
	}
	return ps, nil
}

// Call is one decision of a script call: what it asks, and the answer.
type Call struct {
	Key    string  // the Redis key
	N      int64   // the cost; 0 to look (Peek and Get); -1-u to set the usage to u (Set)
	Policy *Policy // the policy given with the call; nil: the limiter's own
	Now    int64   // tests: the script's now, Unix ns; 0: the server's TIME

	Res  core.Decision // Allowed, Remaining, ResetAfter, RetryAfter and Delay
	Used int64         // a look: the key's usage; else -1 for a denial the deny cache must not keep
}

// Caller is a Call, or what holds one.
type Caller interface{ ScriptCall() *Call }

// ScriptCall returns c.
func (c *Call) ScriptCall() *Call { return c }

// Command returns the command of one script call of form f deciding calls
// (EVALSHA, or EVAL when the server lacks the script), keyed or in the
// cross-slot form. A fresh one every time: a client hook may keep a
// command after it was answered.
func Command[C Caller](ctx context.Context, f *Form, calls []C, cross, eval bool) *redis.Cmd {
	var given []*Policy // the distinct policies given with the calls, usually none
	for _, c := range calls {
		if ps := c.ScriptCall().Policy; ps != nil && !slices.Contains(given, ps) {
			given = append(given, ps)
		}
	}
	m := len(calls)
	size := 6 + 2*m
	if len(given) > 0 {
		size += m + len(given)*len(given[0].args)
	}
	args := make([]any, 0, size)
	if eval {
		args = append(args, "eval", f.Src)
	} else {
		args = append(args, "evalsha", f.sha)
	}
	if cross {
		args = append(args, 0) // the keys are arguments
	} else {
		args = append(args, m)
	}
	for _, c := range calls {
		args = append(args, c.ScriptCall().Key)
	}
	for _, c := range calls {
		args = append(args, c.ScriptCall().N)
	}
	if len(given) > 0 {
		for _, c := range calls {
			args = append(args, slices.Index(given, c.ScriptCall().Policy)+1) // 0: the limiter's own
		}
		for _, ps := range given {
			args = append(args, ps.args...)
		}
	}
	args = append(args, len(given))
	if now := calls[0].ScriptCall().Now; now != 0 {
		args = append(args, strconv.FormatInt(now/1000, 10), now%1000)
	} else {
		args = append(args, "", "")
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // a cluster client routes by the first key
	return cmd
}

// Parse reads a script's reply into its calls' answers.
func Parse[C Caller](v any, calls []C) error {
	f, ok := v.(string)
	if !ok || len(f) != 40*len(calls) {
		return fmt.Errorf("redisstore: unexpected script reply %T of %d bytes for %d calls", v, len(f), len(calls))
	}
	for i, cc := range calls {
		c := cc.ScriptCall()
		var x [5]int64
		for j := range x {
			x[j] = int64(binary.LittleEndian.Uint64([]byte(f[40*i+8*j : 40*i+8*j+8])))
		}
		d := &c.Res
		d.Allowed = x[0] == 1
		d.Remaining = x[1]
		d.ResetAfter = time.Duration(max(x[2], 0))
		d.RetryAfter = time.Duration(max(x[3], 0))
		switch {
		case c.N == 0:
			c.Used = x[4] // a look: the fifth is the usage, the delay 0
		case x[4] < 0:
			c.Used = -1
		default:
			d.Delay = time.Duration(x[4])
		}
	}
	return nil
}
