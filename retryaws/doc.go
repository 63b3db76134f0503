// Package retryaws makes a retry.Policy the one retry layer of AWS SDK for
// Go v2 clients (aws-sdk-go-v2 v1.48; tested with service/s3 and
// service/dynamodb): New returns an aws.RetryerV2 that replaces the SDK's
// standard retryer, so that the SDK makes exactly the attempts the policy
// allows, waits as the policy says, reports every attempt to the policy's
// Budget, Throttle and Observer as retry.Do does, and repeats a request
// whose reply was lost only when the operation is safe to repeat.
//
//	r, err := retryaws.New(retry.Policy{Initial: 50 * time.Millisecond, Jitter: retry.FullJitter(), MaxAttempts: 4})
//	if err != nil { ... }
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer { return r }))
//
// or a client's Options.Retryer, or one call's options
// (func(o *dynamodb.Options) { o.Retryer = r }).
//
// # What each SDK hook does
//
// The SDK's retry loop (the Attempt middleware, before signing, so that each
// attempt is signed again) calls the Retryer's methods in a fixed order on
// the goroutine of the call:
//
//	MaxAttempts        returns 0 ("no limit" for the SDK's own check): the policy's
//	                   MaxAttempts is applied by GetRetryToken, so that a call that
//	                   used its attempts up ends with retrykit's error
//	GetAttemptToken    first attempt: refuses an overridden attempt limit (below),
//	                   starts the call's retry.Loop and its first attempt
//	                   (Loop.Begin: a Throttle's rejection waits and asks again
//	                   as in retry.Do)
//	(the release)      after each attempt: Loop.Record; on success Loop.Succeeded
//	IsErrorRetryable   returns true for every error, so that GetRetryToken decides
//	GetRetryToken      after each failure: classification, then Loop.Failed (the
//	                   stop rules, Budget, EventRetry), Loop.Wait (ended by the
//	                   context) and Loop.Begin for the retry; or the error that
//	                   ends the call, with EventDone
//	RetryDelay         returns -(5 s + 1 ns): the wait is over (see Waits)
//
// A call whose context had ended before its first attempt is not seen at
// all: the SDK returns the context's error without asking the Retryer.
// The Observer is called with the attempt's context, except for the
// EventDone of a success, which gets context.Background() (the release has
// no context); the Logger gets the same events as the Observer, with the
// same contexts. AttemptTimeout is not applied (a Retryer cannot bound an
// attempt: use the HTTP client's timeouts or the context).
//
// # Errors
//
// When GetRetryToken ends a call, the SDK joins its error to the last
// attempt's with errors.Join: the caller's error still matches what the
// service answered (errors.As finds the smithy.APIError, the
// *smithyhttp.ResponseError) and also unwraps to the *retry.Error that
// retry.Do would have returned (Attempts, Elapsed, Reason, and the
// context's error for ReasonContext and ReasonDeadline), so that
// retry.IsExhausted holds and an enclosing retry.Do does not send the call
// again. A call that wrote something and one of whose attempts lost its
// reply also matches retry.ErrMaybeApplied, whatever its later attempts met. A
// nil *Retryer refuses every call, unsent, with an error.
//
// # Classification
//
// Retried: what the SDK's standard retryer retries, by its exported
// classifiers (retry.DefaultRetryables: throttling and transient codes,
// 500, 502, 503, 504, an unmodelled 429, connection errors and timeouts,
// clock skew beyond 4 minutes, which the SDK corrects before the retry, and
// S3's 200 with an error body, which the SDK rewrites as a 500). Anything
// else, such as AccessDenied, ValidationException or
// ConditionalCheckFailedException, is sent once: waiting never makes an
// invalid request valid. Then, of what may be retried:
//
//	failure                                                    Unsafe operation   other classes
//	throttling, 429, 503, another 4xx, a clock-skew refusal    retried            retried
//	never sent (a refused dial, an SDK error before sending)   retried            retried
//	reset, timeout, context ended after sending;
//	500, 502, 504; a 2xx whose body could not be read          ErrMaybeApplied    retried
//
// An error that carries no sign of the transport (neither the SDK's
// ResponseError nor its RequestSendError, nor a network, context or
// deserialization error) counts as one before sending: the SDK's signing,
// credentials and endpoint errors are such. A user's middleware or
// interceptor after the retry loop that replaces an attempt's outcome with
// such an error, one the SDK's classifiers retry, has an unsafe write
// repeated although the service may have applied it: wrap the attempt's
// error (%w) or return one that is not retryable.
//
// An operation's Class comes from Safety (docs/aws.md has the table for S3
// and DynamoDB), WithClass, or MarkSafe for one call. Policy.Retryable,
// when set, replaces the SDK's classifiers (the first rule above); what is
// not safe to repeat still ends the call. An error
// that a lower retrykit layer already gave up on (retry.IsExhausted) is not
// retried unless Policy.RetryExhausted.
//
// # Waits
//
// The wait before a retry is the policy's (Policy.Delay), or, when the
// response carries x-amz-retry-after (milliseconds), max(policy's wait,
// header + uniform 0..min(1 s, header/10)); a header above
// WithMaxServerWait (5 min) ends the call at once with the throttling
// error. The SDK's own rule, which would apply to any retryer's delay d,
// is min(max(header, d), d + 5 s): it lengthens d towards the header but by
// 5 s at most, so a server asking for 20 s is retried after about 5 s.
// Here the Retryer waits in GetRetryToken itself and returns a RetryDelay
// of -(5 s + 1 ns), for which the SDK's rule yields a negative wait, that
// is none: the wait is the policy's alone, and the context ends it with an
// EventDone. Do not wrap the Retryer with retry.AddWithMaxBackoffDelay,
// which replaces RetryDelay and would add the SDK's waits to the policy's.
//
// # Attempt limits the SDK overrides
//
// The SDK lets Options.RetryMaxAttempts, which aws.Config.RetryMaxAttempts
// fills from AWS_MAX_ATTEMPTS or max_attempts in the shared config,
// replace a custom retryer's attempt limit, by wrapping it
// (retry.AddWithMaxAttempts), at the client or for one call.
// config.LoadDefaultConfig does not read them when it is given
// config.WithRetryer, but it does when the Retryer is set afterwards, on the
// aws.Config or on a client. A call made through such a wrapper is refused
// before its first attempt is sent, with an error matching
// ErrMaxAttemptsOverride (retry.IsExhausted holds for it too); Check
// reports the same for a client's Retryer at once. Set RetryMaxAttempts to
// 0.
//
// # What the wire sees
//
// The SDK's Amz-Sdk-Request header, attempt=N (1 for the first attempt),
// without max= (MaxAttempts is 0), and Amz-Sdk-Invocation-Id, one per call.
// An idempotency token (ClientRequestToken, ClientToken) that the SDK
// fills is filled once per call, before the retry loop, so every attempt
// sends the same token. Nothing else is added.
//
// # Request bodies
//
// A request body that cannot be rewound (an io.Reader that is not an
// io.Seeker, such as a pipe, given to PutObject or UploadPart) cannot be
// sent again, and the SDK does not tell a Retryer which calls have one.
// Install AddBodyCheck (config.WithAPIOptions) and such a call is not
// retried: its first failure ends it, with an error matching
// retry.ErrMaybeApplied when the reply was lost and retry.IsExhausted always.
// Without it, GetRetryToken decides to retry and waits, and the SDK then
// ends the call with its own "failed to rewind transport stream" error,
// which carries neither the attempt's error nor ErrMaybeApplied nor
// retry.IsExhausted (a retry.Do around the call sends it again), and the
// Observer has an EventAttempt for an attempt that was not sent and no
// EventDone. An io.ReadSeeker is retried as the operation's class says.
//
// # Per-call state
//
// The SDK hands a Retryer no per-call object. The attempt number and the
// SDK's attempt limit are read from the call's context through the SDK's
// exported (deprecated) MetricsHeader middleware, which writes them into a
// request of the Retryer's own; the rest of a call's state (waits so far,
// the start of the call, the previous wait) travels in the release
// functions the SDK is given, and from a failed attempt to GetRetryToken,
// which the SDK calls next on the same goroutine with the same error value,
// in a small map keyed by that error, each entry marked with the service,
// the operation, MarkSafe and the SDK's attempt number. Two calls that fail
// at the same moment with one shared error value (a package-level error
// of a user's middleware or interceptor; the SDK's transport and
// deserializers return fresh ones) are told apart by these marks; two
// that also match in all of them may exchange their attempt counts and
// waits so far, never their class. An error value that cannot be a map key
// (one holding a slice, a map or a function) is matched by the marks
// alone. A wrapper around the Retryer
// whose IsErrorRetryable says false without asking it ends calls without
// an EventDone.
//
// A context that ends in the instant between GetRetryToken's return and
// the next attempt (after the wait, which the context ends otherwise) is
// seen by the SDK alone: the call returns the SDK's context error without
// the attempt's, and the Observer has an EventAttempt for an attempt that
// was not sent and no EventDone.
//
// A Retryer is safe for concurrent use, and one may serve every client.
package retryaws
