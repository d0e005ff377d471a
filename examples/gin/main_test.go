package main

import (
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/go-ratelimit/ratelimit/examples/internal/exampleapp"
)

func TestServer(t *testing.T) {
	gin.SetMode(gin.TestMode)
	exampleapp.Run(t, newHandler)
}
