package main

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/nethttp/adaptertest"
)

func TestServer(t *testing.T) { adaptertest.RunExampleApp(t, newHandler) }
