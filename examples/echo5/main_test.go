package main

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/examples/internal/exampleapp"
)

func TestServer(t *testing.T) { exampleapp.Run(t, newHandler) }
