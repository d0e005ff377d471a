package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/grpcmw"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

func TestUnaryDeniesTheSixthCallWithRetryInfoAndQuotaFailure(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(5, time.Minute).WithName("per-peer"))
	srv := serveUnary(t, lim)
	c := dial(t, srv, "127.0.0.1")
	for i := range 5 {
		r := unaryCallFrom(t, c)
		if r.code != codes.OK {
			t.Fatalf("call %d: got %v, want OK", i+1, r.code)
		}
		want := map[string]string{"x-ratelimit-limit": "5", "x-ratelimit-remaining": fmt.Sprint(4 - i), "x-ratelimit-reset": "6", "retry-after": ""}
		for name, v := range want {
			if got := r.field(t, name); got != v {
				t.Errorf("call %d: %s = %q, want %q", i+1, name, got, v)
			}
		}
	}
	r := unaryCallFrom(t, c)
	if r.code != codes.ResourceExhausted {
		t.Fatalf("call 6: got %v, want ResourceExhausted", r.code)
	}
	if r.retry == nil || r.retry.GetRetryDelay().AsDuration() != 6*time.Second {
		t.Errorf("RetryInfo: got %v, want a retry delay of exactly 6s", r.retry)
	}
	if v := r.quota.GetViolations(); len(v) != 1 || v[0].GetQuotaId() != "per-peer" || v[0].GetQuotaValue() != 5 || v[0].GetSubject() != "" {
		t.Errorf("QuotaFailure: got %v, want one violation of quota_id per-peer, quota_value 5, no subject", r.quota)
	}
	want := map[string]string{"x-ratelimit-limit": "5", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "6", "retry-after": "6"}
	for name, v := range want {
		if got := r.field(t, name); got != v {
			t.Errorf("denial: %s = %q, want %q", name, got, v)
		}
	}
	if got := srv.svc.calls.Load(); got != 5 {
		t.Errorf("handler served %d calls, want 5", got)
	}
}

// TestCompositeDenialNamesThePartsThatDenied: a policy made with
// core.AllOf (2 per minute and 3 per hour): the third call is denied by the
// minute's part alone, with its RetryInfo, and the X-RateLimit fields of
// the part that binds.
func TestCompositeDenialNamesThePartsThatDenied(t *testing.T) {
	p := core.AllOf(core.FixedWindow(2, time.Minute).WithName("minute"), core.FixedWindow(3, time.Hour).WithName("hour"))
	srv := serveUnary(t, newLimiter(t, p))
	c := dial(t, srv, "127.0.0.1")
	for i := range 2 {
		if r := unaryCallFrom(t, c); r.code != codes.OK || r.field(t, "x-ratelimit-remaining") != fmt.Sprint(1-i) {
			t.Fatalf("call %d: %v, remaining %q; want OK, %d", i+1, r.code, r.field(t, "x-ratelimit-remaining"), 1-i)
		}
	}
	r := unaryCallFrom(t, c)
	if r.code != codes.ResourceExhausted || r.retry.GetRetryDelay().AsDuration() != 6*time.Second {
		t.Fatalf("call 3: %v, RetryInfo %v; want ResourceExhausted, 6s", r.code, r.retry)
	}
	if v := r.quota.GetViolations(); len(v) != 1 || v[0].GetQuotaId() != "minute" || v[0].GetQuotaValue() != 2 {
		t.Errorf("QuotaFailure: got %v, want one violation, of minute (2)", r.quota)
	}
	if got := r.field(t, "x-ratelimit-limit"); got != "2" {
		t.Errorf("x-ratelimit-limit = %q, want the binding part's 2", got)
	}
}

func TestUnaryKeysByPeer(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(2, time.Minute))
	srv := serveUnary(t, lim)
	a, b := dial(t, srv, "127.0.0.1"), dial(t, srv, "127.0.0.2")
	for _, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if got := unaryCallFrom(t, a).code; got != want {
			t.Errorf("peer 127.0.0.1: got %v, want %v", got, want)
		}
	}
	for _, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if got := unaryCallFrom(t, b).code; got != want {
			t.Errorf("peer 127.0.0.2: got %v, want %v", got, want)
		}
	}
	if got := srv.svc.calls.Load(); got != 4 {
		t.Errorf("handler served %d calls, want 4", got)
	}
}

func TestTrustedProxies(t *testing.T) {
	ev := newEvents()
	lim := newLimiter(t, core.FixedWindow(1, time.Minute))
	srv := serveUnary(t, lim, grpcmw.WithHook(ev.hook), grpcmw.WithKey(grpcmw.Peer(keyfunc.TrustProxies("127.0.0.1/32"))))
	proxy, direct := dial(t, srv, "127.0.0.1"), dial(t, srv, "127.0.0.2")

	t.Run("a trusted proxy's x-forwarded-for names the caller", func(t *testing.T) {
		for _, client := range []string{"203.0.113.7", "203.0.113.8"} {
			if got := unaryCallFrom(t, proxy, "x-forwarded-for", "1.1.1.1, "+client).code; got != codes.OK {
				t.Errorf("first call of %s: got %v, want OK", client, got)
			}
		}
		if got := unaryCallFrom(t, proxy, "x-forwarded-for", "203.0.113.7").code; got != codes.ResourceExhausted {
			t.Errorf("second call of 203.0.113.7: got %v, want ResourceExhausted", got)
		}
	})
	t.Run("a spoofed x-forwarded-for from an untrusted peer is ignored", func(t *testing.T) {
		for i, spoof := range []string{"198.51.100.1", "198.51.100.2"} {
			want := codes.OK
			if i > 0 {
				want = codes.ResourceExhausted // the same caller, whatever it claims
			}
			if got := unaryCallFrom(t, direct, "x-forwarded-for", spoof).code; got != want {
				t.Errorf("call %d with x-forwarded-for %s: got %v, want %v", i+1, spoof, got, want)
			}
		}
	})
	var keys []string
	for _, e := range ev.list() {
		keys = append(keys, e.Key)
	}
	if want := fmt.Sprint([]string{"203.0.113.7", "203.0.113.8", "203.0.113.7", "127.0.0.2", "127.0.0.2"}); fmt.Sprint(keys) != want {
		t.Errorf("keys: got %v, want %v", keys, want)
	}
}

func TestMetadataKey(t *testing.T) {
	lim := newLimiter(t, core.FixedWindow(1, time.Minute))
	srv := serveUnary(t, lim, grpcmw.WithKey(grpcmw.Metadata("X-API-Key")))
	c := dial(t, srv, "127.0.0.1")
	for _, tt := range []struct {
		md   []string
		want codes.Code
	}{
		{[]string{"x-api-key", "k1"}, codes.OK},
		{[]string{"x-api-key", "k2"}, codes.OK},
		{[]string{"x-api-key", " k1 "}, codes.ResourceExhausted}, // trimmed: the same key
		{nil, codes.Unauthenticated},
		{[]string{"x-api-key", "  "}, codes.Unauthenticated},
	} {
		if got := unaryCallFrom(t, c, tt.md...).code; got != tt.want {
			t.Errorf("metadata %q: got %v, want %v", tt.md, got, tt.want)
		}
	}
	if got := srv.svc.calls.Load(); got != 2 {
		t.Errorf("handler served %d calls, want 2", got)
	}
}

func TestMethodPolicy(t *testing.T) {
	ev := newEvents()
	lim := newLimiter(t, core.FixedWindow(3, time.Minute).WithName("default"))
	srv := serveUnary(t, lim, grpcmw.WithHook(ev.hook),
		grpcmw.WithMethodPolicy(unaryCall, core.FixedWindow(1, time.Minute).WithName("unary")))
	c := dial(t, srv, "127.0.0.1")
	if r := unaryCallFrom(t, c); r.code != codes.OK || r.field(t, "x-ratelimit-limit") != "1" {
		t.Fatalf("first UnaryCall: got %v, limit %q; want OK under the method's limit 1", r.code, r.field(t, "x-ratelimit-limit"))
	}
	r := unaryCallFrom(t, c)
	if v := r.quota.GetViolations(); r.code != codes.ResourceExhausted || len(v) != 1 || v[0].GetQuotaId() != "unary" {
		t.Errorf("second UnaryCall: got %v, %v; want ResourceExhausted naming the policy unary", r.code, r.quota)
	}
	for i := range 3 { // the other methods share the limiter's policy, not charged by UnaryCall
		if _, err := c.EmptyCall(context.Background(), &testpb.Empty{}); err != nil {
			t.Errorf("EmptyCall %d: %v", i+1, err)
		}
	}
	if _, err := c.EmptyCall(context.Background(), &testpb.Empty{}); codes.ResourceExhausted != statusCode(err) {
		t.Errorf("EmptyCall 4: got %v, want ResourceExhausted", err)
	}
	if got, want := ev.list()[0].Key, keyfunc.JoinKeys(unaryCall, "127.0.0.1"); got != want {
		t.Errorf("key of UnaryCall: got %q, want %q", got, want)
	}
}

func TestMethodPolicyPanicsAtConstruction(t *testing.T) {
	tb := core.TokenBucket(5, time.Second)
	for _, tt := range []struct {
		name string
		lim  core.Limiter
		opt  grpcmw.Option
		want string
	}{
		{"a limiter that is not a PolicyLimiter", failing(errors.New("down")), grpcmw.WithMethodPolicy(unaryCall, tb),
			"grpcmw: UnaryServerInterceptor: WithMethodPolicy: needs a core.PolicyLimiter, and coretest.Failing is not one"},
		{"another algorithm", newLimiter(t, core.FixedWindow(1, time.Second)), grpcmw.WithMethodPolicy(unaryCall, tb),
			"grpcmw: UnaryServerInterceptor: WithMethodPolicy: /grpc.testing.TestService/UnaryCall: TokenBucket policy for a FixedWindow limiter: core: policy's algorithm differs from the limiter's"},
		{"an invalid policy", newLimiter(t, tb), grpcmw.WithMethodPolicy(unaryCall, core.TokenBucket(0, time.Second)),
			"grpcmw: UnaryServerInterceptor: WithMethodPolicy: /grpc.testing.TestService/UnaryCall: core: TokenBucket limit must be > 0, got 0"},
		{"a policy made with AllOf for a limiter of one part", newLimiter(t, tb), grpcmw.WithMethodPolicy(unaryCall, core.AllOf(tb.WithName("s"), core.TokenBucket(50, time.Minute).WithName("m"))),
			"grpcmw: UnaryServerInterceptor: WithMethodPolicy: /grpc.testing.TestService/UnaryCall: a policy made with core.AllOf for a limiter of a policy of one part: core: policy's algorithm differs from the limiter's"},
		{"a method that is not a full method", newLimiter(t, tb), grpcmw.WithMethodPolicy("UnaryCall", tb),
			`grpcmw: UnaryServerInterceptor: WithMethodPolicy: method "UnaryCall" is not a full method (/package.Service/Method)`},
		{"a nil option", newLimiter(t, tb), nil, "grpcmw: UnaryServerInterceptor: nil Option"},
		{"a nil limiter", nil, grpcmw.WithDryRun(), "grpcmw: UnaryServerInterceptor: nil limiter"},
		{"a nil *MemoryLimiter", (*core.MemoryLimiter)(nil), grpcmw.WithDryRun(), "grpcmw: UnaryServerInterceptor: nil limiter (a nil *core.MemoryLimiter)"},
	} {
		t.Run("panics for "+tt.name, func(t *testing.T) {
			if got := panicText(func() { grpcmw.UnaryServerInterceptor(tt.lim, tt.opt) }); got != tt.want {
				t.Errorf("got panic %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDryRunServesEveryCall(t *testing.T) {
	ev := newEvents()
	lim := newLimiter(t, core.FixedWindow(1, time.Minute))
	srv := serveUnary(t, lim, grpcmw.WithDryRun(), grpcmw.WithHook(ev.hook))
	c := dial(t, srv, "127.0.0.1")
	for i := range 3 {
		r := unaryCallFrom(t, c)
		if r.code != codes.OK || r.field(t, "x-ratelimit-remaining") != "0" || r.field(t, "retry-after") != "" {
			t.Errorf("call %d: got %v, remaining %q, retry-after %q; want OK, 0, none", i+1, r.code, r.field(t, "x-ratelimit-remaining"), r.field(t, "retry-after"))
		}
	}
	var outcomes []nethttp.Outcome
	for _, e := range ev.list() {
		outcomes = append(outcomes, e.Outcome)
	}
	if want := []nethttp.Outcome{nethttp.OutcomeAllowed, nethttp.OutcomeDryRun, nethttp.OutcomeDryRun}; fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes: got %v, want %v", outcomes, want)
	}
	if got := srv.svc.calls.Load(); got != 3 {
		t.Errorf("handler served %d calls, want 3", got)
	}
}

func statusCode(err error) codes.Code { return replyOf(err, nil).code }

func TestHeaderStyles(t *testing.T) {
	p := core.FixedWindow(2, time.Minute).WithName("per-peer")
	t.Run("IETF fields, as the HTTP adapters write them", func(t *testing.T) {
		srv := serveUnary(t, newLimiter(t, p), grpcmw.WithHeaderStyle(nethttp.HeadersIETF))
		r := unaryCallFrom(t, dial(t, srv, "127.0.0.1"))
		if got := r.field(t, "ratelimit-policy"); got != `"per-peer";q=2;w=60` {
			t.Errorf("ratelimit-policy = %q", got)
		}
		if got := r.field(t, "ratelimit"); got != `"per-peer";r=1;t=6` {
			t.Errorf("ratelimit = %q", got)
		}
		if got := r.field(t, "x-ratelimit-limit"); got != "" {
			t.Errorf("x-ratelimit-limit = %q, want none", got)
		}
	})
	t.Run("no fields but a denial's retry-after", func(t *testing.T) {
		srv := serveUnary(t, newLimiter(t, p), grpcmw.WithHeaderStyle(nethttp.HeadersNone))
		c := dial(t, srv, "127.0.0.1")
		for i := range 3 {
			r := unaryCallFrom(t, c)
			want := ""
			if i == 2 {
				want = "6"
			}
			if got := r.field(t, "retry-after"); got != want || r.field(t, "x-ratelimit-limit") != "" {
				t.Errorf("call %d: metadata %v, want retry-after %q alone", i+1, r.header, want)
			}
		}
	})
	t.Run("panics for an unknown style", func(t *testing.T) {
		if got := panicText(func() { grpcmw.WithHeaderStyle(9) }); got != "grpcmw: WithHeaderStyle: unknown header style HeaderStyle(9)" {
			t.Errorf("got %q", got)
		}
	})
}
