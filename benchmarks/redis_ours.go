package benchmarks

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// oursRedis is our Redis store with its defaults (token bucket script, the
// deny cache, concurrent calls batched into pipelines) but for the per-call
// timeout: 3 s, the bound the peers get from go-redis's default read
// timeout, instead of our 50 ms default, which on a busy shared machine
// turns an occasional scheduling stall into an error (and the benchmark
// counts an error as a wrong answer).
func oursRedis() []RedisLib {
	return []RedisLib{{Name: "ours", Denies: true, New: func(rdb *redis.Client, l Limit) (Limiter, error) {
		lim, err := redisstore.New(rdb, core.TokenBucket(l.N, l.Window), redisstore.WithTimeout(3*time.Second))
		if err != nil {
			return nil, err
		}
		return oursRedisLimiter{lim}, nil
	}}}
}

type oursRedisLimiter struct{ lim *redisstore.Limiter }

func (o oursRedisLimiter) Allow(key string) (bool, error) {
	d, err := o.lim.AllowN(context.Background(), key, 1)
	return d.Allowed, err
}
func (o oursRedisLimiter) Sweep() {}
func (o oursRedisLimiter) Close() { o.lim.Close() }
