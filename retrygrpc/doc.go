// Package retrygrpc makes retrykit the one retry layer of a gRPC client:
// unary and stream client interceptors that retry with a retry.Policy, and
// DialOptions, which installs both and turns off grpc-go's own retry.
//
//	dopts, err := retrygrpc.DialOptions(policy) // refuses an invalid policy
//	if err != nil {
//		return err
//	}
//	cc, err := grpc.NewClient(target, append(dopts,
//		grpc.WithTransportCredentials(creds))...)
//
// # What is retried
//
// By default UNAVAILABLE and RESOURCE_EXHAUSTED, on every method: the
// gRPC counterparts of the 503 and 429 of the cloud guidance, with which
// a server refuses a call it did not process. DEADLINE_EXCEEDED is
// retried when the policy has an AttemptTimeout and the caller's context
// is still alive. Every other code returns at once, unchanged.
// [WithCodes] replaces the set.
//
// Only an attempt that received no response headers is retried (gRFC A6's
// commit rule, which grpc-go's own retry applies too): once the server's
// application has answered, the call may have been applied, and a
// RESOURCE_EXHAUSTED may be the client's own (grpc-go raises it for a
// response larger than grpc.MaxCallRecvMsgSize after the server ran the
// method). A stream commits at its response headers too, at its first
// response message, and when grpc-go fails a SendMsg on the client.
//
// A request larger than the server's grpc.MaxRecvMsgSize (grpc-go's
// default: 4 MiB) is retried, and every attempt repeats the failure: the
// server refuses a unary request with RESOURCE_EXHAUSTED before the method
// runs, trailers-only, and only the status message ("grpc: received
// message larger than max") tells it from a server's own
// RESOURCE_EXHAUSTED, with the same code, no headers, no details and no
// trailer of its own (the interceptors do not match message text). Give
// the client the server's limit as grpc.MaxCallSendMsgSize (a call option,
// or grpc.WithDefaultCallOptions): grpc-go then refuses such a request on
// the client, sending nothing, and that is not retried. (On a stream the
// method runs: its RecvMsg gets the error, and the client sees what the
// method returns.)
//
// That does not make every retried attempt one that the server did not
// process. The client also reports UNAVAILABLE when the connection is lost
// before any response headers arrive ("error reading from server: EOF"),
// and that happens too when the server applied the call and then crashed,
// or the network failed before its answer came back. gRFC A6 and grpc-go's
// own retry retry such a failure too, and the interceptors cannot tell it
// from a call that never reached the server. A method that is not safe to
// repeat (one that creates, appends, charges, sends) can thus run twice.
// [WithMethods] limits retries to the methods you name: name the
// idempotent ones, the more so when the set holds codes after which the
// server may have applied the call (INTERNAL, UNKNOWN, ABORTED).
//
// # What the wire sees (gRFC A6)
//
// Every retry carries the metadata grpc-previous-rpc-attempts with the
// number of earlier attempts sent ("1" on the first retry; attempts that
// the Throttle rejected were not sent and do not count); first attempts
// do not, and a value that the caller's outgoing metadata carries (a
// proxy forwarding its incoming metadata) is dropped, on every method,
// those that [WithMethods] leaves out included. The interceptors
// read the trailer grpc-retry-pushback-ms: a non-negative integer is the
// least wait in milliseconds before the retry, a negative or malformed
// value means "do not retry", and so do several values in one trailer
// (grpc-go does not retry then either). They read
// google.rpc.RetryInfo from the status details the same way
// (retry_delay is the least wait). A server's wait is capped by
// [WithMaxServerWait] (5 min by default: asking for more, or for more
// than a time.Duration holds whatever the cap, returns the error at
// once), gets a jitter of up to min(1 s, 10%) so that clients
// told the same wait do not return together, and ends the call at once
// when it would pass the context's deadline or the policy's MaxElapsed.
//
// # One layer
//
// grpc-go can retry by itself when a service config enables it; stacked
// under these interceptors, 3 attempts over its 4 make 12 calls.
// [DialOptions] adds grpc.WithDisableRetry() so that it cannot. What
// remains is grpc-go's transparent retry of attempts that never reached
// the server's application (the stream was refused or never left the
// client): such an attempt did nothing, and WithDisableRetry does not turn
// it off. Two retrykit layers do not multiply either: an error that an
// inner retrykit loop gave up on (a *retry.Error) is not retried again
// unless the policy sets RetryExhausted.
//
// The loop is retry.Do's: Budget, Throttle (ThrottleConfig.Accepted when
// set; otherwise UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED
// count as overload, except grpc-go's own RESOURCE_EXHAUSTED for a request
// over grpc.MaxCallSendMsgSize, raised on the client), the nesting rule
// and the hooks behave exactly as there. When the server's answer refuses a retry that the code allows (a
// "do not retry" pushback, or response headers on a unary call), the
// interceptors return a *retry.Error even after one attempt, so that
// retrygax, retry.Do or another interceptor above do not retry what they
// cannot see.
//
// # Hedging (gRFC A6)
//
// [WithHedging], an option of the retry interceptor, names the unary
// methods it hedges with a retry.Hedger (the others keep their retries): after
// the hedging delay another copy goes out, up to Policy.MaxAttempts; the
// codes of WithCodes are the nonFatalStatusCodes; the first OK wins and
// the others are cancelled; pushback stops hedges; every copy beyond the
// first draws on the Policy's Budget. Streams are not hedged.
//
// # Cost
//
// A successful unary call through the interceptor makes its one attempt
// with two more call options, grpc.Header and grpc.Trailer, and allocates
// nothing of its own; grpc-go copies the response headers and the trailer
// for these options. Over loopback, with grpc-go v1.85 and a server that
// sends no metadata of its own, that is 5 allocations more than a bare
// call (158 against 153: 3 for the headers' copy, 1 for the trailer's,
// and 1 that grpc-go makes for any call that carries options, when it
// prepends its own to them), and as
// many as a bare call that asks for both (TestUnaryNoExtraAllocs). A
// server's own headers and trailers add to the copies.
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package retrygrpc
