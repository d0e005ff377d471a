package nethttp

import (
	"encoding/json"
	"net/http"

	"github.com/go-ratelimit/ratelimit/core"
)

// ProblemType is the RFC 9457 problem type of a denial written by
// ProblemJSON, registered by draft-ietf-httpapi-ratelimit-headers.
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// denyText is the default denial: 429 with a short text/plain body.
func denyText(w http.ResponseWriter, _ *http.Request, d core.Decision) {
	msg := "Too Many Requests"
	if d.RetryAfter <= 0 {
		msg = "Too Many Requests: the request costs more than the rate limit ever admits"
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// keyErrorText is the default answer to a request without a key.
func keyErrorText(w http.ResponseWriter, _ *http.Request, _ error) {
	http.Error(w, "Bad Request: the request carries no rate-limit key", http.StatusBadRequest)
}

// problem is the RFC 9457 body. Every value comes from the policy, never
// from the request.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// ProblemJSON is a denial handler for WithDenyHandler that answers 429 with
// an RFC 9457 application/problem+json body of type ProblemType, naming the
// violated policy (its IETF policy name) in "violated-policies" (see the
// example): for a policy made with core.AllOf, each part that denied.
func ProblemJSON(w http.ResponseWriter, _ *http.Request, d core.Decision) {
	p := problem{
		Type:   ProblemType,
		Title:  "Request cannot be satisfied as assigned quota has been exceeded",
		Status: http.StatusTooManyRequests,
		Detail: "Retry later; see the Retry-After header.",
	}
	if d.RetryAfter <= 0 {
		p.Detail = "The request costs more than the policy ever admits; retrying cannot succeed."
	}
	for _, q := range d.Parts() { // the parts that denied, or else the policy
		if !q.Allowed {
			p.ViolatedPolicies = append(p.ViolatedPolicies, q.Policy.Label())
		}
	}
	if p.ViolatedPolicies == nil {
		p.ViolatedPolicies = []string{d.Policy.Label()}
	}
	body, _ := json.Marshal(p) // cannot fail: strings (invalid UTF-8 is replaced) and an int
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}
