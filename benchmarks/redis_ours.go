package benchmarks

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// oursRedis is our Redis store exactly as a user builds it, every default
// (deny cache, the 50 ms timeout, concurrent calls decided together): the
// token bucket, like for like with the GCRA peers (redis_rate, throttled),
// and the fixed window, like for like with ulule's.
func oursRedis() []RedisLib {
	lib := func(name string, policy func(Limit) core.Policy) RedisLib {
		return RedisLib{Name: name, Denies: true, New: func(rdb *redis.Client, l Limit) (Limiter, error) {
			lim, err := redisstore.New(rdb, policy(l))
			if err != nil {
				return nil, err
			}
			return oursRedisLimiter{lim}, nil
		}}
	}
	return []RedisLib{
		lib("ours", func(l Limit) core.Policy { return core.TokenBucket(l.N, l.Window) }),
		lib("ours-fixed", func(l Limit) core.Policy { return core.FixedWindow(l.N, l.Window) }),
	}
}

type oursRedisLimiter struct{ lim *redisstore.Limiter }

// errNotRedis is a decision of the local fallback: Redis did not answer
// within the timeout (a machine too busy to measure Redis).
var errNotRedis = errors.New("decided by the local fallback, not Redis")

func (o oursRedisLimiter) Allow(key string) (bool, error) {
	d, err := o.lim.AllowN(context.Background(), key, 1)
	if err == nil && d.Source == core.SourceFallback {
		err = errNotRedis
	}
	return d.Allowed, err
}
func (o oursRedisLimiter) Sweep() {}
func (o oursRedisLimiter) Close() { o.lim.Close() }
