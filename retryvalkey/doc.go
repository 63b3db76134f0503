// Package retryvalkey integrates retrykit with valkey-go.
//
// # Sharing a budget across a fleet
//
// [ShareBudget] and [ShareThrottle] make a retry.Budget or retry.Throttle
// in each process decide as one shared by every process that uses the
// same key prefix on the same Valkey (or Redis, or Memorystore) server.
// Requests never wait on the server: each process decides from its own
// counts plus the fleet's counts as of the last background sync (one
// EVALSHA every 100 ms by default), and decides alone when the server is
// slow or down. The client is the caller's, configured as they need (AUTH,
// TLS, cluster, Sentinel); see the README section "Sharing a budget across
// a fleet". The keys and the script are those of retryredis, so processes
// using go-redis and processes using valkey-go share one budget.
package retryvalkey
