package chimw

import "github.com/go-ratelimit/ratelimit/nethttp"

// Option is nethttp's Option: every adapter takes the same options
// (nethttp.WithKeyFunc, nethttp.WithCostFunc, nethttp.WithSkip,
// nethttp.WithHeaderStyle, ...), with the same meaning.
type Option = nethttp.Option
