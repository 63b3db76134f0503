// Package retrytest is a kit for testing code that retries with retrykit:
// that a call is retried on a 503, gives up after the policy's attempts,
// honours a Retry-After, reports "maybe applied" after a lost reply, and
// does not retry a 400. It uses only the standard library.
//
// The pieces:
//   - [Backend]: a scripted in-memory HTTP server, answering each call
//     attempt by attempt (status, header, body, latency, a transport error,
//     a lost reply) and counting requests and applied requests per call.
//     It is an http.RoundTripper, for tests inside a testing/synctest
//     bubble, where a run with the zero Policy's waits of up to 32 s takes
//     milliseconds, and an http.Handler, for httptest.
//   - [Chaos]: the same faults drawn per request at a seeded rate, as an
//     http.RoundTripper and as server middleware.
//   - [Proxy]: a lost-reply TCP proxy on loopback in front of a real server
//     (Redis, PostgreSQL, gRPC, HTTP): it forwards each message, lets the
//     server apply it, and drops or resets the reply, by rule or at a rate,
//     counting what was applied. A [Protocol] such as [RESP] tells it where
//     messages begin and end.
//   - [Recorder]: an Observer that records the events of each call, read in
//     one line: rec.Attempts(), rec.Waits(), rec.Hedges(), rec.Reason().
//   - [NoWaits], [Seed] and [Schedule]: a Policy without computed waits,
//     and jitter fixed by a seed so that a test can expect exact waits.
//
// The guide, with a worked test of a small service, is docs/testing.md in
// the repository. Anything that waits belongs in a synctest bubble; the
// network does not: keep httptest servers and the Proxy outside it.
package retrytest
