package benchmarks

import (
	"context"
	"fmt"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	uluredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// RedisLib is one Redis-backed limiter as scenario 6 sees it. Every one
// gets its own client built the same way (see RedisClients), against the
// same server.
type RedisLib struct {
	Name string
	// Denies is false for the bare EVALSHA ceiling, which decides nothing.
	Denies bool
	New    func(rdb *redis.Client, l Limit) (Limiter, error)
}

// RedisClient is one way of building the go-redis client every library of
// scenario 6 gets.
type RedisClient struct {
	Name string
	New  func(addr string) *redis.Client
}

// RedisClients returns the client settings scenario 6 measures, the one
// users get first: redis.NewClient(&redis.Options{Addr: addr}), as
// go-redis's README builds it (ContextTimeoutEnabled false, a pool of 10
// connections per CPU, 3 s socket timeouts); then the same with
// ContextTimeoutEnabled, which makes go-redis apply a context's deadline
// to its sockets (the peers' calls carry no deadline, so it changes
// nothing for them).
func RedisClients() []RedisClient {
	return []RedisClient{
		{Name: "default", New: func(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr}) }},
		{Name: "ctxtimeout", New: func(addr string) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		}},
	}
}

// RedisLibs returns the ceiling, ours (once it has landed) and the peers.
func RedisLibs() []RedisLib {
	libs := []RedisLib{{Name: "evalsha", New: newBareEvalSha}}
	libs = append(libs, oursRedis()...)
	return append(libs,
		RedisLib{Name: "ulule", Denies: true, New: newUluleRedis},
		RedisLib{Name: "throttled", Denies: true, New: newThrottledRedis},
		RedisLib{Name: "redis_rate", Denies: true, New: newRedisRate},
	)
}

// noSweep is the Sweep and Close of the Redis limiters: Redis expires their
// keys itself, and the client is closed by whoever made it.
type noSweep struct{}

func (noSweep) Sweep() {}
func (noSweep) Close() {}

// trivialScript is the ceiling of scenario 6: one EVALSHA round trip with
// the key, as every limiter sends, and no work on the server.
const trivialScript = "return 1"

func newBareEvalSha(rdb *redis.Client, _ Limit) (Limiter, error) {
	sha, err := rdb.ScriptLoad(context.Background(), trivialScript).Result()
	if err != nil {
		return nil, fmt.Errorf("benchmarks: loading the trivial script: %w", err)
	}
	return &bareEvalSha{rdb: rdb, sha: sha}, nil
}

type bareEvalSha struct {
	noSweep
	rdb *redis.Client
	sha string
}

func (e *bareEvalSha) Allow(key string) (bool, error) {
	n, err := e.rdb.EvalSha(context.Background(), e.sha, []string{key}).Int64()
	return n == 1, err
}

// newUluleRedis is ulule/limiter's Redis store: a fixed window per key, one
// EVALSHA (INCRBY, PEXPIRE on the first hit, PTTL) per decision.
func newUluleRedis(rdb *redis.Client, l Limit) (Limiter, error) {
	store, err := uluredis.NewStoreWithOptions(rdb, ulule.StoreOptions{Prefix: "ulule"})
	if err != nil {
		return nil, err
	}
	return &ululeRedis{lim: ulule.New(store, ulule.Rate{Period: l.Window, Limit: l.N})}, nil
}

type ululeRedis struct {
	noSweep
	lim *ulule.Limiter
}

func (u *ululeRedis) Allow(key string) (bool, error) {
	c, err := u.lim.Get(context.Background(), key)
	return !c.Reached, err
}

// newThrottledRedis is throttled's GCRA limiter over its go-redis v9 store:
// GET with TIME, then SETNX or a compare-and-swap script, so at least two
// round trips per decision. The CAS retry limit is raised as in memory.
func newThrottledRedis(rdb *redis.Client, l Limit) (Limiter, error) {
	store, err := throttledredis.NewCtx(rdb, "throttled:")
	if err != nil {
		return nil, err
	}
	return newThrottledGCRA(store, l)
}

// newRedisRate is go-redis/redis_rate: GCRA in one Lua script (EVALSHA,
// falling back to EVAL), N per Window with a burst of N.
func newRedisRate(rdb *redis.Client, l Limit) (Limiter, error) {
	return &redisRate{
		lim:   redis_rate.NewLimiter(rdb),
		limit: redis_rate.Limit{Rate: int(l.N), Burst: int(l.N), Period: l.Window},
	}, nil
}

type redisRate struct {
	noSweep
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
}

func (r *redisRate) Allow(key string) (bool, error) {
	res, err := r.lim.Allow(context.Background(), key, r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}
