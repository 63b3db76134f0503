// Package retryhttp retries HTTP requests with package retry: a
// [Transport] (an http.RoundTripper) that retries 408, 429, most 5xx and
// transient transport errors, safely and without copying bodies, and a
// server [Middleware] that keeps layered services from multiplying retries.
//
// Quick start:
//
//	client, err := retryhttp.NewClient(retry.Policy{MaxAttempts: 4}) // err: an invalid Policy
//	resp, err := client.Get(url) // a final 503 comes back as a response, err == nil
//
// # What is retried
//
//	status 408, 429, 500, 502, 503, 504, 5xx ... retried (RetryStatus changes the set)
//	status 501, 505, 511 and all other 4xx       returned at once: waiting cannot heal them
//	dial failure or timeout, connection refused
//	or reset, EOF before a response, attempt
//	timeout, timeout awaiting headers, HTTP/2
//	GOAWAY                                       retried (a timeout also when net or
//	                                              net/http reports it as matching
//	                                              context.DeadlineExceeded)
//	bad URL, unsupported scheme, TLS certificate
//	errors, the caller's context ending          returned at once
//	GET HEAD OPTIONS TRACE PUT DELETE             retried
//	POST PATCH ...                                only with Idempotency-Key / X-Idempotency-Key
//	                                              (not empty or blank; nil-valued counts),
//	                                              RetryNonIdempotent, a dial failure or a 429
//	a server timing hint: Retry-After,            honoured as a floor under the policy's wait
//	retry-after-ms, x-ms-retry-after-ms,          (plus up to min(1 s, 10%) jitter) up to
//	RateLimit, X-RateLimit-Reset or               MaxServerWait and the deadline; beyond, the
//	RateLimit-Reset with a remaining of 0,        response is returned at once (see ParseHint
//	x-ratelimit-reset-* (first valid in order)    for the formats)
//	body with GetBody                             replayed through GetBody, never copied
//	body without GetBody                          buffered up to MaxBufferedBody, else sent once
//	a hint too large for a time.Duration          more than MaxServerWait: returned at once
//	with a Pacer: a response saying the quota     later requests to its host held until the
//	is spent (RateLimit r=0, remaining 0)         reset (EventHeld); one past its deadline
//	                                              is not sent
//
// Every attempt, retried or not, goes through the policy's loop: Throttle,
// Budget, AttemptTimeout, Observer and Logger see it as retry.Do's would.
//
// # What the wire and the caller see
//
//	request  Retry-Attempt: n     on every retry, n = 2, 3, ... (the attempt's
//	                              number); absent on a first attempt
//	response Retry-Attempt: n     set by the Transport on the response it
//	                              returns after n > 1 attempts; read it with
//	                              [Attempts]
//	response Retry-Exhausted: 1   set by the Transport on a response it gave
//	                              up on, and by [Middleware] on a service's
//	                              failing response when its own outgoing calls
//	                              gave up; read it with [Exhausted]. A Transport
//	                              receiving it does not retry.
//
// The response marks live in the header, not in a body wrapper, so they
// survive http.Client.Timeout (which wraps the body), proxies that copy
// headers, and generated API clients that turn a response into an error
// value keeping status, body bytes and header: for example, from a
// googleapi.Error, apiErr.Header.Get(retryhttp.HeaderExhausted) == "1".
// Retry-Attempt numbers attempts from 1, as Envoy's x-envoy-attempt-count
// does; no standard defines either name. The Transport never sets
// Retry-Attempt on a response obtained at the first attempt, so one found
// there comes from below (an inner Transport) or from the server; it sets
// Retry-Exhausted on such a response only when it gave up on it (a
// retryable status with MaxAttempts 1, or a Throttle rejecting every
// retry).
//
// # Hedging
//
// With Transport.Hedge set, a request safe to send several times at once
// gets another copy once the last one sent has been outstanding the
// Hedger's delay (retry.Hedge has the rules):
//
//	GET HEAD OPTIONS TRACE PUT DELETE, or a key   hedged
//	POST PATCH ... without a key                  never hedged (RetryNonIdempotent
//	                                              does not change this); retried as usual
//	body with GetBody, or buffered                every copy sends it whole
//	body too large to buffer                      not hedged; sent once
//	a copy's answer not retried (2xx, 4xx ...)    wins; the others are cancelled and
//	                                              their responses closed before RoundTrip returns
//	a copy's retryable status or error            the next copy goes at once
//	a server hint on a copy's answer              no more hedges (pushback)
//	the caller's context ends                     every copy ends
//
// Each hedge carries Retry-Attempt with its own number; the winning
// response carries its attempt number in Retry-Attempt when it was not
// the first. Hedges draw on Policy.Budget and go through Policy.Throttle,
// and Policy.MaxAttempts caps the copies in all.
//
// # The true number of sends
//
// net/http's own http.Transport also resends, once, a request that it wrote
// on a reused keep-alive connection which the server had closed before
// answering (it cannot tell whether the server saw it), when the request is
// idempotent (GET, HEAD, OPTIONS, TRACE) or carries an Idempotency-Key or
// X-Idempotency-Key header, and its body can be rewound. That resend is
// invisible to this package and is not counted in Policy.MaxAttempts or
// [Attempts]: with MaxAttempts n, a server may see up to 2n copies of such
// a request in the worst case, each of them one the server may not have
// processed. Requests without a key using POST or PATCH are never resent by
// either layer.
//
// # No amplification across layers
//
// When a [Transport] gives up it marks the response with [HeaderExhausted]
// (see [Exhausted]) and, if the request's context comes from a handler wrapped
// in [Middleware], tells the middleware, which then adds [HeaderExhausted]
// to the handler's failing response. A Transport receiving that header does
// not retry, so in a chain of services only the layer next to the failure
// retries. Every retry carries [HeaderAttempt] with its attempt number.
// In one process, a Transport under another Transport is likewise not
// retried again, and under a retry.Do loop its transport errors (a
// *retry.Error) are not retried again by default (see
// retry.Policy.RetryExhausted); for a response, check [Exhausted] in the
// operation.
package retryhttp
