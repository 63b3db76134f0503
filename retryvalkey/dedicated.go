package retryvalkey

import (
	"context"

	"github.com/valkey-io/valkey-go"
)

// Dedicated calls fn with a dedicated client (one connection, as
// valkey-go's Dedicated gives it) whose Do, DoMulti and Receive are
// retried as the client's own: each call on a retry.Loop of the policy.
func (c *client) Dedicated(fn func(valkey.DedicatedClient) error) error {
	return c.Client.Dedicated(func(d valkey.DedicatedClient) error {
		return fn(&dedicated{DedicatedClient: d, c: c})
	})
}

// Dedicate returns a dedicated client, as valkey-go's Dedicate does, whose
// Do, DoMulti and Receive are retried as the client's own, and the
// function that releases it.
func (c *client) Dedicate() (valkey.DedicatedClient, func()) {
	d, release := c.Client.Dedicate()
	return &dedicated{DedicatedClient: d, c: c}, release
}

// Nodes returns the clients of the nodes, as valkey-go's Nodes does, each
// wrapped as this client is (the same policy, command table and WithIdempotent names), so
// that a command sent to one node is retried as any other.
func (c *client) Nodes() map[string]valkey.Client {
	nodes := c.Client.Nodes()
	out := make(map[string]valkey.Client, len(nodes))
	for addr, n := range nodes {
		out[addr] = &client{Client: n, r: c.r, readOnly: c.readOnly, idempotent: c.idempotent, closed: c.closed}
	}
	return out
}

// dedicated is a dedicated client of c: its sends go through the
// dedicated connection, on retry.Loops of c's policy.
type dedicated struct {
	valkey.DedicatedClient
	c *client
}

// Do sends one command as the client's Do does, on the dedicated
// connection.
func (d *dedicated) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	return d.c.do(ctx, d.DedicatedClient, cmd)
}

// DoMulti sends commands as the client's DoMulti does, on the dedicated
// connection.
func (d *dedicated) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	return d.c.doMulti(ctx, d.DedicatedClient, multi)
}

// Receive subscribes as the client's Receive does, on the dedicated
// connection.
func (d *dedicated) Receive(ctx context.Context, subscribe valkey.Completed, fn func(valkey.PubSubMessage)) error {
	return d.c.receive(ctx, d.DedicatedClient, subscribe, fn)
}
