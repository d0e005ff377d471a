// Package redisstore runs the policies of package core in Redis, so that
// many app servers share one limit. Its Limiter implements core.Limiter
// with the same Decisions as the in-memory limiter, each decided
// atomically by one Lua script per algorithm, in one round trip.
package redisstore
