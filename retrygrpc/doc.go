// Package retrygrpc makes retrykit the one retry layer of a gRPC client:
// unary and stream client interceptors that retry with a retry.Policy, and
// DialOptions, which installs both and turns off grpc-go's own retry.
//
//	cc, err := grpc.NewClient(target, append(retrygrpc.DialOptions(policy),
//		grpc.WithTransportCredentials(creds))...)
//
// # What is retried
//
// By default UNAVAILABLE and RESOURCE_EXHAUSTED, on every method: the
// gRPC counterparts of the 503 and 429 of the cloud guidance, which say
// that the server did not process the call, so repeating it is safe
// whatever the method does. DEADLINE_EXCEEDED is retried when the policy
// has an AttemptTimeout and the caller's context is still alive. Every
// other code returns at once, unchanged. [WithCodes] replaces the set;
// [WithMethods] limits retries to the methods you name, which you should
// do whenever the set holds codes after which the server may have applied
// the call (INTERNAL, UNKNOWN, ABORTED).
//
// # What the wire sees (gRFC A6)
//
// Every retry carries the metadata grpc-previous-rpc-attempts with the
// number of earlier attempts ("1" on the first retry); first attempts do
// not. The interceptors read the trailer grpc-retry-pushback-ms: a
// non-negative integer is the least wait in milliseconds before the
// retry, a negative or malformed value means "do not retry". They read
// google.rpc.RetryInfo from the status details the same way
// (retry_delay is the least wait). A server's wait is capped by
// [WithMaxServerDelay] (5 min by default: asking for more returns the
// error at once), gets a jitter of up to min(1 s, 10%) so that clients
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
// The loop is retry.Do's: Budget, Throttle (UNAVAILABLE,
// RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED count as overload), the
// nesting rule and the hooks behave exactly as there.
package retrygrpc
