// Package retryotel reports what retrykit's retry loops do to
// OpenTelemetry: metrics for every call, span events on the caller's span,
// and, for HTTP, one client span per attempt.
//
// [Instrument] returns a retry.Policy whose Observer records the metrics
// below under the meter named [ScopeName], each with the attribute
// retry.operation set to the operation name it was given:
//
//	retry.call.attempts      Int64Histogram   {attempt} once per call: attempts made (1 = success at first try)
//	retry.call.retry_delay   Float64Histogram s         once per call that retried or waited to: total time waited
//	retry.call.gave_up       Int64Counter     {call}    once per call that gave up, with retry.reason
//	retry.attempt.throttled  Int64Counter     {attempt} each attempt a retry.Throttle rejected locally
//	retry.retry.refused      Int64Counter     {retry}   each retry a retry.Budget refused
//	retry.hedge.sent         Int64Counter     {hedge}   each hedge sent (retry.Hedge, retryhttp.Transport.Hedge)
//	retry.hedge.won          Int64Counter     {hedge}   each call won by a hedge, not by its first copy
//	retry.hedge.refused      Int64Counter     {hedge}   each hedge a retry.Budget or retry.Throttle refused
//
// [ObserveThrottle] adds, for one retry.Throttle, the gauge
// retry.throttle.rejection_probability (Float64ObservableGauge, unit 1):
// the probability that it rejects an attempt locally, read at each
// collection, with retry.throttle set to the name it was given.
//
// A hedge is also an attempt: it counts in retry.call.attempts, and under
// a retryhttp.Transport with a Hedge and [NewAttemptTransport] as its Base
// it gets its own client span, like a retry, with
// http.request.resend_count from its Retry-Attempt. Each hedge sent adds a
// "retry.hedge" event (retry.attempt) to the caller's span.
//
// A call whose context was already done before its first attempt records
// 0 attempts (and gives up with reason context). A call "retried" when it
// made more than one attempt, attempts a Throttle rejected included; a call
// whose context ended during its first wait records the time it waited.
//
// retry.reason is one of attempts, permanent, exhausted, time_budget,
// deadline, context and budget, one per retry.Reason in the order of its
// constants. When the call's context holds a recording
// span, the observer also adds events to it: "retry" before each wait
// (attributes retry.attempt, the attempt that failed; retry.delay, the
// wait in seconds; error.message; retry.hint, when a retryhttp server hint
// set the wait, such as "RateLimit t=2"), "retry.held" (a retryhttp.Pacer
// holding attempt retry.attempt for retry.delay, as retry.hint says),
// "retry.throttled", "retry.budget_refused"
// and "retry.gave_up" (retry.attempts, retry.reason, error.message). It
// never starts, ends or sets the status of a span itself.
//
// For HTTP, retryotel composes with retryhttp.Transport rather than
// replacing it: [NewAttemptTransport] is the Transport's Base, which sends
// every attempt through otelhttp, OpenTelemetry's HTTP client
// instrumentation, and Instrument makes its Policy. Every other field of
// the Transport (Hedge, RetryStatus, MaxServerWait, …) keeps its meaning,
// and the operation name is yours. A call that gives up on a retryable
// status after MaxAttempts (the Transport returns the last 503 as a
// response with a nil error) counts in retry.call.gave_up with
// retry.reason = attempts. The layers are, from the caller down:
//
//	retryhttp.Transport       Policy from Instrument(p, operation)
//	  └ otelhttp.Transport      one client span per attempt, traceparent injected
//	      └ resend_count layer  sets http.request.resend_count on resends
//	          └ base            sends the attempt
//
// Retrying outside and instrumenting inside is what the OpenTelemetry HTTP
// semantic conventions ask for: every attempt is its own client span, a
// child of the caller's span, and carries its own traceparent on the wire,
// so the server's spans of a retried request hang under the attempt that
// produced them; no span covers all attempts (the caller's own span plays
// that part, and carries the "retry" events). The other order, one
// otelhttp span around the whole retry loop, would send one traceparent for
// every attempt, hide the retries from the trace and time the waits as if
// they were the request.
//
// What the wire sees: each attempt carries the headers of the global
// propagator as it is at that attempt (otel.GetTextMapPropagator; with propagation.TraceContext, a
// traceparent per attempt, W3C Trace Context), and every retry carries
// retryhttp.HeaderAttempt (Retry-Attempt: 2 on the first retry). The
// attempt span of a request after the call's first has
// http.request.resend_count, the number of requests sent before it for
// the call, as the stable HTTP semantic conventions define it ("for any
// reason, including redirects"): attempt − 1 on a retry, read from that
// header, plus every request of the earlier hops when http.Client
// follows a redirect (it does so above the transport, and each hop's
// request links, through its Response field, to the redirect response
// that caused it, whose Retry-Attempt header counts that hop's attempts).
// So a 503, its retry, a 302 and the redirected request have absent, 1, 2.
// The first request's span does not have it (the retryhttp.Transport
// sends a first attempt without a Retry-Attempt header, even one the
// caller's request had).
//
// What counts as an attempt: every attempt of the retry loop, so
// retry.call.attempts also counts the attempts that never reached the
// server, as the loop does: one a Throttle rejected (also counted in
// retry.attempt.throttled) and a retry whose body could not be rebuilt
// (the request's GetBody failed; it ends the call). Below the spans,
// net/http's own Transport resends an idempotent request once, by itself,
// when a connection it reused closes before any answer: that resend is
// part of the same attempt, under the same span and traceparent, so a
// server can then see one traceparent twice.
//
// Costs: with the observer on, a call that succeeds at once pays two
// Observe calls and one histogram recording (docs/performance.md, section
// Observability, for the measured figures). Attribute sets are built once,
// by Instrument.
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package retryotel
