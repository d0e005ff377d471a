package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-ratelimit/ratelimit/redisstore/redistest"
)

func TestTwoServersShareOneLimit(t *testing.T) {
	addr := redistest.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	require.NoError(t, run(ctx, &out, addr, 10, 30), out.String())
	assert.Contains(t, out.String(), "admitted 10 of 30 (server A 5, server B 5) with a limit of 10: the limit held across both servers")
	assert.Equal(t, 10, strings.Count(out.String(), ": 200 "))
	assert.Equal(t, 20, strings.Count(out.String(), ": 429 "))
}

func TestNoRedis(t *testing.T) {
	err := run(context.Background(), &strings.Builder{}, "127.0.0.1:1", 10, 30)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Redis at 127.0.0.1:1")
}
