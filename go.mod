module github.com/go-ratelimit/ratelimit

go 1.25
