package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/keyfunc"
	"github.com/go-ratelimit/ratelimit/nethttp"
	"github.com/go-ratelimit/ratelimit/nethttp/sloghook"
	"github.com/go-ratelimit/ratelimit/promhook"
)

// app holds the plans, which key is on which plan, and the one limiter
// that serves them all.
type app struct {
	lim     *core.MemoryLimiter
	logs    *sloghook.Hook
	metrics *promhook.Metrics
	// config is read on every request without a lock and replaced as a
	// whole by the admin handlers (copy on write), under mu.
	config atomic.Pointer[config]
	mu     sync.Mutex
}

type config struct {
	plans map[string]core.Policy // plan name -> policy
	keys  map[string]string      // API key -> plan name
}

// errUnknownKey is the error of an API key no plan knows: a key error, as a
// missing key is, so that the middleware answers it with keyError.
var errUnknownKey = fmt.Errorf("%w: unknown API key", keyfunc.ErrNoKey)

// headerKey is the request's X-API-Key header.
var headerKey = keyfunc.Header("X-API-Key")

func newApp(reg prometheus.Registerer, logger *slog.Logger, opts ...core.Option) (*app, error) {
	// The limiter's own policy is the free plan; every plan must use its
	// algorithm (token bucket), and all share one set of keys.
	lim, err := core.New(startPlans["free"], opts...)
	if err != nil {
		return nil, err
	}
	a := &app{lim: lim, logs: sloghook.New(logger)}
	a.config.Store(&config{plans: maps.Clone(startPlans), keys: maps.Clone(startKeys)})
	metrics := promhook.New()
	metrics.WatchKeys("plans", lim)
	if err := reg.Register(metrics); err != nil {
		_ = lim.Close()
		return nil, err
	}
	a.metrics = metrics
	return a, nil
}

// Close stops the limiter and writes the log lines still pending.
func (a *app) Close() error {
	a.logs.Flush()
	return a.lim.Close()
}

// apiKey is the key function: the request's API key, if a plan knows it.
func (a *app) apiKey(r *http.Request) (string, error) {
	key, err := headerKey(r)
	if err != nil {
		return "", err
	}
	if _, ok := a.config.Load().keys[key]; !ok {
		return "", errUnknownKey
	}
	return key, nil
}

// keyError answers a request without a known API key: 401, as for any
// missing or wrong credential, naming the header to send. The error is not
// written: it may quote the request.
func keyError(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header().Set("WWW-Authenticate", `ApiKey header="X-API-Key"`)
	http.Error(w, "Unauthorized: send a valid API key in the X-API-Key header", http.StatusUnauthorized)
}

// policyFor is the per-request policy lookup: the plan of the request's
// API key, as configured right now.
func (a *app) policyFor(_ *http.Request, key string) (core.Policy, error) {
	c := a.config.Load()
	p, ok := c.plans[c.keys[key]]
	if !ok {
		return core.Policy{}, errUnknownKey
	}
	return p, nil
}

// API is the rate-limited API. A request without an API key, or with one
// no plan knows, is a key error, answered 401 by keyError before any
// limiter is asked. Should the plan lookup still fail (a key's plan
// removed), WithFailClosed answers 503 rather than letting it through
// unlimited.
func (a *app) API() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `["apple","pear"]`)
	})
	return nethttp.Middleware(a.lim,
		nethttp.WithKeyFunc(a.apiKey),
		nethttp.WithKeyErrorHandler(keyError),
		nethttp.WithPolicyFunc(a.policyFor),
		nethttp.WithFailClosed(),
		nethttp.WithHeaderStyle(nethttp.HeadersBoth),
		nethttp.WithHook(a.metrics.Observe),
		nethttp.WithHook(a.logs.Handle),
	)(mux)
}

// Admin serves the admin endpoints and /metrics.
func (a *app) Admin(reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("PUT /admin/keys/{key}/plan", a.setKeyPlan)
	mux.HandleFunc("PUT /admin/plans/{plan}/limit", a.setPlanLimit)
	mux.HandleFunc("GET /admin/keys/{key}", a.showKey)
	return mux
}

// setKeyPlan moves an API key to the plan named in the body. The key keeps
// what it has used: its next request is decided under the new plan.
func (a *app) setKeyPlan(w http.ResponseWriter, r *http.Request) {
	plan, ok := readBody(w, r)
	if !ok {
		return
	}
	a.update(w, func(c *config) error {
		if _, ok := c.plans[plan]; !ok {
			return fmt.Errorf("no plan %q", plan)
		}
		c.keys[r.PathValue("key")] = plan
		return nil
	})
}

// setPlanLimit changes a plan's limit (and burst) per minute, for every key
// on it, as a configuration reload would.
func (a *app) setPlanLimit(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	limit, err := strconv.ParseInt(body, 10, 64)
	if err != nil {
		http.Error(w, "the body must be a whole number", http.StatusBadRequest)
		return
	}
	a.update(w, func(c *config) error {
		p, ok := c.plans[r.PathValue("plan")]
		if !ok {
			return fmt.Errorf("no plan %q", r.PathValue("plan"))
		}
		p.Limit, p.Burst = limit, limit
		if err := p.Validate(); err != nil {
			return err
		}
		c.plans[p.Name] = p
		return nil
	})
}

// showKey reports a key's usage under its plan, without consuming.
func (a *app) showKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	p, err := a.policyFor(r, key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	u, err := a.lim.Get(r.Context(), p, key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "plan=%s limit=%d used=%d remaining=%d\n", p.Name, p.Limit, u.Used, u.Remaining)
}

// update applies change to a copy of the configuration and publishes it.
func (a *app) update(w http.ResponseWriter, change func(*config) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.config.Load()
	c := &config{plans: maps.Clone(old.plans), keys: maps.Clone(old.keys)}
	if err := change(c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.config.Store(c)
	w.WriteHeader(http.StatusNoContent)
}

func readBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64))
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
