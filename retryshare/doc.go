// Package retryshare keeps one [retry.Budget] or [retry.Throttle] in step
// across the processes of a fleet, through a Redis-compatible server: each
// process syncs its counts from a background goroutine, and its Budget or
// Throttle then decides as one shared by every process that syncs under the
// same key prefix. Nothing is sent on the request path.
//
// The server is reached through a [Store], a small adapter of a client:
// retryredis.ShareStore adapts a go-redis client, retryvalkey.ShareStore a
// valkey-go client. Start sharing with [Budget] or [Throttle]:
//
//	s, err := retryshare.Budget(retryredis.ShareStore(rdb), "payments-api", budget)
//
// The bound a shared Budget keeps, what happens when the server is down or
// slow, and the figures measured with real servers are in the guide,
// docs/redis.md ("Sharing a budget across a fleet").
package retryshare
