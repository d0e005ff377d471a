package main

import (
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestServer(t *testing.T) {
	gin.SetMode(gin.TestMode)
	adaptertest.RunExampleApp(t, newHandler)
}
