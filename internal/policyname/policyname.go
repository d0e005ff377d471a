// Package policyname names a policy the one way nethttp's IETF headers and
// the ready-made hooks (nethttp/sloghook, promhook, otelhook) all report it
// by.
package policyname

import (
	"strconv"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Of returns p.Name when set, otherwise a name derived from the policy
// alone, such as "tokenbucket-100-per-60s" (never from anything a client
// sent); "" for the zero Policy, which an Event carries when no policy was
// known (a key or cost error, a failed WithPolicyFunc lookup).
func Of(p core.Policy) string {
	switch {
	case p.Name != "":
		return p.Name
	case p == core.Policy{}:
		return ""
	}
	w := p.Window.String()
	if p.Window > 0 && p.Window%time.Second == 0 {
		w = strconv.FormatInt(int64(p.Window/time.Second), 10) + "s"
	}
	return strings.ToLower(p.Algorithm.String()) + "-" + strconv.FormatInt(p.Limit, 10) + "-per-" + w
}
