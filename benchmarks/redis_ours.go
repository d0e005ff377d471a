package benchmarks

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/redisstore"
)

// oursRedis is our Redis store exactly as a user builds it: token bucket
// script, every default (deny cache, the 50 ms timeout, concurrent calls
// decided together).
func oursRedis() []RedisLib {
	return []RedisLib{{Name: "ours", Denies: true, New: func(rdb *redis.Client, l Limit) (Limiter, error) {
		lim, err := redisstore.New(rdb, core.TokenBucket(l.N, l.Window))
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
