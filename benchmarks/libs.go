package benchmarks

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/didip/tollbooth/v7"
	tollboothlimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/go-chi/httprate"
	"github.com/labstack/echo/v4/middleware"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulumem "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/go-ratelimit/ratelimit/core"
)

// Limit is the one configuration every library gets: N requests per Window.
// Each library expresses it in its own terms (a rate and a burst, a count
// per period, a GCRA quota); the constructors below translate, and the sanity
// tests check that the translation admits and denies as intended.
type Limit struct {
	N      int64
	Window time.Duration
}

var (
	// AllowAll is so high that every request of a benchmark passes: no run
	// sends a billion requests for one key within an hour.
	AllowAll = Limit{N: 1_000_000_000, Window: time.Hour}
	// DenyMost admits the first request of a key and denies every other one
	// for an hour.
	DenyMost = Limit{N: 1, Window: time.Hour}
)

// perSecond is the limit as a rate per second, for the libraries that take
// one (x/time/rate and the libraries built on it).
func (l Limit) perSecond() float64 { return float64(l.N) / l.Window.Seconds() }

// Limiter is one library's per-key limiter reduced to the question every
// scenario asks: may a request for key pass now?
type Limiter interface {
	Allow(key string) (bool, error)
	// Sweep triggers the library's own cleanup of idle keys, the way that
	// library does it (see Lib.Cleanup). It is called once by cmd/memkeys
	// after the TTL has passed; libraries that clean up on their own
	// goroutine need nothing here.
	Sweep()
	Close()
}

// Lib is one library as the in-memory scenarios (1, 2, 3 and 5) see it.
type Lib struct {
	Name string
	// Denies is false for a library that cannot refuse a request: uber's
	// ratelimit is a pacer whose Take blocks until the request may go.
	Denies bool
	// WholeKeys is false for a library that stores a hash of the key
	// instead of the key (httprate): its bytes per key do not grow with the
	// key's length, and two keys can collide.
	WholeKeys bool
	// Cleanup says how the library drops idle keys, and so what cmd/memkeys
	// waits for and triggers.
	Cleanup string
	New     func(l Limit, c Config) (Limiter, error)
}

// Config holds the settings some libraries need beyond the limit.
type Config struct {
	// TTL is how long an idle key is kept, for the libraries that take
	// such a setting (and how often their sweepers run).
	TTL time.Duration
	// MaxKeys bounds the keys held, for the libraries that have a bound
	// (ours, throttled's LRU).
	MaxKeys int
}

// defaultTTL is the idle-key lifetime given to the libraries that ask for
// one in the speed scenarios: as long as the window, so nothing expires
// while a benchmark runs.
const defaultTTL = time.Hour

// DefaultConfig is the configuration of the speed scenarios: an hour's TTL
// and 1,000,000 keys at most, our default bound.
var DefaultConfig = Config{TTL: defaultTTL, MaxKeys: 1_000_000}

// Libs returns every in-memory library, ours first.
func Libs() []Lib {
	return []Lib{
		ours("ours-token", core.TokenBucket),
		ours("ours-fixed", core.FixedWindow),
		ours("ours-sliding", core.SlidingWindow),
		{Name: "xtime", Denies: true, WholeKeys: true, New: newXTime,
			Cleanup: "the user's wrapper: a janitor deletes keys not seen for the TTL (memkeys calls it once)"},
		{Name: "uber", Denies: false, WholeKeys: true, New: newUber,
			Cleanup: "the user's wrapper: a janitor deletes keys not seen for the TTL (memkeys calls it once)"},
		{Name: "ulule", Denies: true, WholeKeys: true, New: newUlule,
			Cleanup: "its store's cleaner goroutine, every CleanUpInterval (set to the TTL), drops expired windows"},
		{Name: "sethvargo", Denies: true, WholeKeys: true, New: newSethvargo,
			Cleanup: "its sweeper goroutine, every SweepInterval (set to the TTL), drops keys idle longer than SweepMinTTL (the TTL)"},
		{Name: "httprate", Denies: true, WholeKeys: false, New: newHTTPRate,
			Cleanup: "lazily: the first request after two windows clears both counter maps (memkeys sends one)"},
		{Name: "throttled", Denies: true, WholeKeys: true, New: newThrottled,
			Cleanup: "none by time: memstore ignores TTLs and only evicts least-recently-used keys beyond its bound"},
		{Name: "tollbooth", Denies: true, WholeKeys: true, New: newTollbooth,
			Cleanup: "the caller runs DeleteExpiredTokenBuckets (buckets expire after the TTL); memkeys calls it once"},
		{Name: "echo", Denies: true, WholeKeys: true, New: newEcho,
			Cleanup: "lazily: the first request more than ExpiresIn (the TTL) after the last cleanup deletes stale visitors (memkeys sends one)"},
	}
}

// ours is our in-memory limiter with one algorithm at the given limit, as a
// user builds it: core.New with its defaults (idle keys swept by its own
// goroutine) but for the key bound, which is Config.MaxKeys (the default
// bound, 1,000,000, is enforced per shard and so starts evicting slightly
// before; cmd/memkeys raises it so that every one of its keys is stored).
func ours(name string, policy func(int64, time.Duration) core.Policy) Lib {
	return Lib{
		Name: name, Denies: true, WholeKeys: true,
		Cleanup: "its own janitor goroutine sweeps keys idle past the policy's recovery time, every max(1s, recovery)",
		New: func(l Limit, c Config) (Limiter, error) {
			lim, err := core.New(policy(l.N, l.Window), core.WithMaxKeys(c.MaxKeys))
			if err != nil {
				return nil, err
			}
			return oursLimiter{lim}, nil
		},
	}
}

type oursLimiter struct{ lim *core.MemoryLimiter }

func (o oursLimiter) Allow(key string) (bool, error) {
	d, err := o.lim.AllowN(context.Background(), key, 1)
	return d.Allowed, err
}
func (o oursLimiter) Sweep() {}
func (o oursLimiter) Close() { o.lim.Close() }

// Len reports how many keys are stored, for cmd/memkeys.
func (o oursLimiter) Len() int { return o.lim.Len() }

// newXTime is golang.org/x/time/rate in the per-key wrapper users write (see
// perKey): one rate.Limiter per key refilling N per Window with a burst of N.
func newXTime(l Limit, c Config) (Limiter, error) {
	every := rate.Every(l.Window / time.Duration(l.N))
	return &xtimeLimiter{perKey[*rate.Limiter]{ttl: c.TTL, newLimiter: func() *rate.Limiter {
		return rate.NewLimiter(every, int(l.N))
	}}}, nil
}

type xtimeLimiter struct{ keys perKey[*rate.Limiter] }

func (x *xtimeLimiter) Allow(key string) (bool, error) {
	now := time.Now()
	return x.keys.get(key, now).AllowN(now, 1), nil
}
func (x *xtimeLimiter) Sweep() { x.keys.sweep(time.Now()) }
func (x *xtimeLimiter) Close() {}

// newUber is go.uber.org/ratelimit in the same per-key wrapper. It is a
// pacer: Take never refuses, it sleeps until the request may go. So it is
// only ever measured allowing, and "allow all" for a pacer means a rate at
// which Take never has to wait: one request per nanosecond (uber's finest),
// whatever l says.
func newUber(_ Limit, c Config) (Limiter, error) {
	return &uberLimiter{perKey[uber.Limiter]{ttl: c.TTL, newLimiter: func() uber.Limiter {
		return uber.New(int(time.Second), uber.Per(time.Second))
	}}}, nil
}

type uberLimiter struct{ keys perKey[uber.Limiter] }

func (u *uberLimiter) Allow(key string) (bool, error) {
	u.keys.get(key, time.Now()).Take()
	return true, nil
}
func (u *uberLimiter) Sweep() { u.keys.sweep(time.Now()) }
func (u *uberLimiter) Close() {}

// newUlule is ulule/limiter with its memory store: a fixed window of N per
// Window per key, in a sync.Map of counters under a prefixed key.
func newUlule(l Limit, c Config) (Limiter, error) {
	store := ulumem.NewStoreWithOptions(ulule.StoreOptions{Prefix: "limiter", CleanUpInterval: c.TTL})
	return &ululeLimiter{ulule.New(store, ulule.Rate{Period: l.Window, Limit: l.N})}, nil
}

type ululeLimiter struct{ lim *ulule.Limiter }

func (u *ululeLimiter) Allow(key string) (bool, error) {
	c, err := u.lim.Get(context.Background(), key)
	return !c.Reached, err
}
func (u *ululeLimiter) Sweep() {}
func (u *ululeLimiter) Close() {}

// newSethvargo is sethvargo/go-limiter's memorystore: N tokens per Window per
// key, a map under a read-write lock, a mutex per bucket.
func newSethvargo(l Limit, c Config) (Limiter, error) {
	store, err := memorystore.New(&memorystore.Config{
		Tokens: uint64(l.N), Interval: l.Window, SweepInterval: c.TTL, SweepMinTTL: c.TTL,
	})
	if err != nil {
		return nil, err
	}
	return &sethvargoLimiter{store}, nil
}

type sethvargoLimiter struct {
	store interface {
		Take(context.Context, string) (uint64, uint64, uint64, bool, error)
		Close(context.Context) error
	}
}

func (s *sethvargoLimiter) Allow(key string) (bool, error) {
	_, _, _, ok, err := s.store.Take(context.Background(), key)
	return ok, err
}
func (s *sethvargoLimiter) Sweep() {}
func (s *sethvargoLimiter) Close() { s.store.Close(context.Background()) }

// newHTTPRate is go-chi/httprate's limiter: a sliding-window counter of N per
// Window over one mutex. Its only per-key decision entry point is
// RateLimiter.OnLimit(w, r, key), which also writes the X-RateLimit headers
// into w; we give it a reused request and a pooled writer (one per
// goroutine at a time: a header map is not safe for concurrent writes), so
// the headers are part of its cost as they are of every use of it.
func newHTTPRate(l Limit, _ Config) (Limiter, error) {
	req, err := http.NewRequest(http.MethodGet, "/", nil)
	if err != nil {
		return nil, err
	}
	h := &httprateLimiter{rl: httprate.NewRateLimiter(int(l.N), l.Window), r: req}
	h.writers.New = func() any { return newDiscardWriter() }
	return h, nil
}

type httprateLimiter struct {
	rl      *httprate.RateLimiter
	r       *http.Request
	writers sync.Pool
}

func (h *httprateLimiter) Allow(key string) (bool, error) {
	w := h.writers.Get().(*discardWriter)
	limited := h.rl.OnLimit(w, h.r, key)
	w.reset()
	h.writers.Put(w)
	return !limited, nil
}

// Sweep sends one request: httprate clears its counters lazily when a
// request arrives in a later window.
func (h *httprateLimiter) Sweep() { h.Allow("sweep") }
func (h *httprateLimiter) Close() {}

// newThrottled is throttled's GCRA limiter over its memstore, bounded by its
// LRU to Config.MaxKeys (1,000,000 as our default; throttled's docs
// recommend a bound). The quota is N per Window with a burst of N (MaxBurst
// counts the requests beyond the first). Its compare-and-swap retry limit is
// raised from the default 10, which on a hot key (scenario 2) makes some
// requests fail with an error instead of a decision.
// newThrottledGCRA is throttled's GCRA limiter over store, as every
// throttled wrapper here uses it: the CAS retry limit raised from its
// default 10, which on a hot key returned errors instead of decisions.
func newThrottledGCRA(store throttled.GCRAStoreCtx, l Limit) (*throttledLimiter, error) {
	gcra, err := throttled.NewGCRARateLimiterCtx(store, throttledQuota(l))
	if err != nil {
		return nil, err
	}
	gcra.SetMaxCASAttemptsLimit(1 << 20)
	return &throttledLimiter{gcra}, nil
}

func newThrottled(l Limit, c Config) (Limiter, error) {
	store, err := throttledmem.NewCtx(c.MaxKeys)
	if err != nil {
		return nil, err
	}
	return newThrottledGCRA(store, l)
}

func throttledQuota(l Limit) throttled.RateQuota {
	return throttled.RateQuota{MaxRate: throttled.PerDuration(int(l.N), l.Window), MaxBurst: int(l.N - 1)}
}

type throttledLimiter struct{ gcra *throttled.GCRARateLimiterCtx }

func (t *throttledLimiter) Allow(key string) (bool, error) {
	limited, _, err := t.gcra.RateLimitCtx(context.Background(), key, 1)
	return !limited, err
}
func (t *throttledLimiter) Sweep() {}
func (t *throttledLimiter) Close() {}

// newTollbooth is didip/tollbooth: an x/time/rate limiter per key in an
// expirable cache, under one mutex. It takes a rate per second; the burst is
// set to N so that it matches the others. We call LimitReached(key), its
// lowest public decision (LimitByKeys adds a strings.Join and a token read).
func newTollbooth(l Limit, c Config) (Limiter, error) {
	lmt := tollbooth.NewLimiter(l.perSecond(), &tollboothlimiter.ExpirableOptions{DefaultExpirationTTL: c.TTL})
	lmt.SetBurst(int(l.N))
	return &tollboothLimiter{lmt}, nil
}

type tollboothLimiter struct{ lmt *tollboothlimiter.Limiter }

func (t *tollboothLimiter) Allow(key string) (bool, error) { return !t.lmt.LimitReached(key), nil }
func (t *tollboothLimiter) Sweep()                         { t.lmt.DeleteExpiredTokenBuckets() }
func (t *tollboothLimiter) Close()                         {}

// newEcho is echo's RateLimiterMemoryStore: an x/time/rate limiter per key
// in a map under one mutex, stale visitors dropped lazily.
func newEcho(l Limit, c Config) (Limiter, error) {
	return &echoLimiter{middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(l.perSecond()), Burst: int(l.N), ExpiresIn: c.TTL,
	})}, nil
}

type echoLimiter struct {
	store *middleware.RateLimiterMemoryStore
}

func (e *echoLimiter) Allow(key string) (bool, error) { return e.store.Allow(key) }

// Sweep sends one request: echo cleans up inside Allow.
func (e *echoLimiter) Sweep() { e.store.Allow("sweep") }
func (e *echoLimiter) Close() {}
