package nethttp

import (
	"fmt"
	"net/http"

	"github.com/go-ratelimit/ratelimit/core"
)

// Renderer writes decisions as the rate-limit fields of [Middleware], for
// adapters of other transports (grpcmw sends them as gRPC metadata): the
// one renderer behind every response, so the fields, their values and
// what is left out are the same whatever carries them. It is safe for
// concurrent use.
type Renderer struct{ rd renderer }

// NewRenderer returns the renderer of decisions under p in style. It panics
// for a style that is not declared or a policy name that is not printable
// ASCII, as Middleware does.
func NewRenderer(p core.Policy, style HeaderStyle) *Renderer {
	if !style.valid() {
		panic(fmt.Errorf("nethttp: NewRenderer: unknown header style %v", style))
	}
	if err := checkPolicyName(p); err != nil {
		panic(fmt.Errorf("nethttp: NewRenderer: %w", err))
	}
	return &Renderer{rd: newRenderer(p, style, false)}
}

// Write sets the fields of d, a decision under the renderer's policy, in h
// as Middleware sets them. deny says whether d is the denial the request is
// answered with: false for an admission and for a denial served under
// [WithDryRun], which must not tell the client to come back later.
func (r *Renderer) Write(h http.Header, d core.Decision, deny bool) { r.rd.write(h, &d, deny) }

// WriteKnown sets what is known of the limit when no decision is (the
// limiter failed): the limit and the policy, never Remaining or Reset.
func (r *Renderer) WriteKnown(h http.Header, limit int64) { r.rd.writeKnown(h, limit) }
