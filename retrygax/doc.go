// Package retrygax makes retrykit the one retry layer of a generated
// Google Cloud Go client (any client built on gax-go v2, over gRPC or
// REST): [WithPolicy] turns a retry.Policy into a gax.CallOption that
// replaces the client's own retry settings, method by method.
//
//	opt, err := retrygax.WithPolicy(retry.Policy{MaxAttempts: 5})
//	if err != nil { ... }
//	c, _ := redis.NewCloudRedisClient(ctx)
//	c.CallOptions.GetInstance = []gax.CallOption{gax.WithTimeout(60 * time.Second), opt}
//
// Generated clients retry little and unevenly: cloud.google.com/go/redis
// (apiv1) retries nothing; cloud.google.com/go/memorystore retries Get and
// List only on UNAVAILABLE or 503. None retries RESOURCE_EXHAUSTED/429,
// 500 or 504 or honours google.rpc.RetryInfo. WithPolicy retries
// UNAVAILABLE and RESOURCE_EXHAUSTED (gRPC) and 408, 429 and 5xx except
// 501, 505, 511 (REST), honours RetryInfo and Retry-After, and stops when a
// lower retrykit layer (retrygrpc's interceptors, a retryhttp.Transport
// under the REST client) already gave up, so stacking it over them never
// multiplies the calls.
//
// gax's Retryer gets no context and is not told about successes; what
// that means for deadlines, the Throttle and the Observer is spelled out
// on [WithPolicy].
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package retrygax
