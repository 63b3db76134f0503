// Package sim is a deterministic discrete-event simulator of many clients
// retrying with a [retry.Policy] against a shared server. It runs the
// library's own rules: each wait is Policy.Delay(n, prev, rng) and a client
// gives up by the Policy's MaxAttempts and MaxElapsed exactly as retry.Do
// does. It uses only the standard library.
//
// # Time and randomness
//
// Time is virtual (nanoseconds from 0); nothing sleeps. Trial k draws every
// random number (start times, latencies, jitter) from one
// rand.New(rand.NewPCG(Seed, k)) in event order, and events are processed in
// (time, client number) order, so a Scenario always gives the same Result.
// A client's state (about 40 bytes) lives in its one pending event; there is
// no goroutine per client.
//
// # Capacity model (Model Capacity, the default)
//
// Clients 0..N-1 each need one successful request. Client i sends its first
// request at 0 or, with a StartWindow W, at a uniform time in [0, W). Time
// is cut into slots of width Slot; the server accepts the first Capacity
// requests arriving in each slot (in arrival order) and fails the rest, as
// a 503 or 429 would; every request arriving before Outage fails. Requests
// are instantaneous (no latency). A failed request is the client's call
// number n+1 (n from 0): if that reaches MaxAttempts the client gives up;
// otherwise it waits d = Delay(n, prev, rng), raised to RetryAfter if that
// is larger, and gives up instead if d would take it past MaxElapsed since
// its first request. Load[s] counts every request arriving in slot s,
// accepted or not: the offered load, to be compared with Capacity.
//
// # Contention model (Model Contention)
//
// This reproduces the optimistic-concurrency study of Marc Brooker's
// "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015). One row
// holds a version number. Each client reads it (the read reaches the server
// after one message delay and records the version there), the answer comes
// back after another delay, and the client at once writes with that version;
// the write reaches the server after a third delay and succeeds if the
// version is unchanged (then the version increments) and the answer reaches
// the client after a fourth delay. Every message delay is drawn from
// |Normal(Latency, LatencySD)|, 10 ms and 2 ms by default. On a failed
// write the client applies the stop rules and waits as above, then reads
// again. Calls (Requests, Load) are writes; a client's completion is when the
// answer to its successful write arrives, so CompletionMax is when the last
// client has succeeded. To match the study use Initial 10 ms (its base of
// 5 ms doubled on its first retry), MaxDelay 2 s and MaxAttempts
// retry.Unlimited.
//
// # Results
//
// Run repeats the model Trials times with independent random streams and
// reports means over trials (see [Result]); Load is the series of trial 0.
// What the Policy's AttemptTimeout, Retryable and hooks do is outside the
// model; a Policy with a Budget or Throttle is rejected.
package sim
