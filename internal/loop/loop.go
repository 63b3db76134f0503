// Package loop holds what the integration packages' own retry.Do loops
// share (retryhttp, retryredis, retryvalkey). Standard library and the
// core only.
package loop

import "github.com/retrykit/retry"

// Policy returns p as an integration's own retry.Do loop needs it. Such a
// loop marks with retry.Permanent what must not be sent again, so every
// other error of an attempt is retryable: even one that matches
// context.DeadlineExceeded while the caller's context is alive (a dial
// timeout, or net/http's timeout awaiting headers, which the standard
// library reports so), which retry.Do alone would take for the end of a
// context of the operation's own and not retry. A Retryable set in p
// decides as it would in retry.Do. Policy allocates nothing.
func Policy(p retry.Policy) retry.Policy {
	if p.Retryable == nil {
		p.Retryable = unmarked
	}
	return p
}

// unmarked is the Retryable of Policy: every error not marked Permanent
// (which the loop never asks about) is retried.
func unmarked(error) bool { return true }
