package retryvalkey

import (
	"context"
	"fmt"

	"github.com/retrykit/retry/retryshare"
	"github.com/valkey-io/valkey-go"
)

// ShareStore returns the [retryshare.Store] of c, a valkey.Client
// (standalone, cluster or Sentinel), also one that [NewClient] returned,
// whose retry loop the syncs skip.
func ShareStore(c valkey.Client) retryshare.Store {
	if w, ok := c.(*client); ok {
		return store{w.Client}
	}
	if c == nil {
		return nil
	}
	return store{c}
}

// store adapts a valkey-go client to retryshare.Store.
type store struct{ c valkey.Client }

// Load loads the script on every node of the client: SCRIPT LOAD has no
// key, and valkey-go sends a keyless command to an arbitrary node of a
// cluster, not the one that serves the prefix's hash slot (where EVALSHA
// goes), which would answer NOSCRIPT again.
func (s store) Load(ctx context.Context, script string) (string, error) {
	nodes := s.c.Nodes()
	if len(nodes) <= 1 {
		return s.c.Do(ctx, s.c.B().ScriptLoad().Script(script).Build()).ToString()
	}
	type loaded struct {
		sha string
		err error
	}
	ch := make(chan loaded, len(nodes))
	for _, n := range nodes {
		go func() {
			sha, err := n.Do(ctx, n.B().ScriptLoad().Script(script).Build()).ToString()
			ch <- loaded{sha, err}
		}()
	}
	var sha string
	var err error
	for range nodes {
		if r := <-ch; r.err != nil {
			err = r.err
		} else {
			sha = r.sha
		}
	}
	if sha == "" {
		return "", err
	}
	return sha, nil // a node that failed answers NOSCRIPT, and is loaded again
}

func (s store) EvalSHA(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	cmd := s.c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	v, err := s.c.Do(ctx, cmd).AsIntSlice()
	if ve, ok := valkey.IsValkeyErr(err); ok && ve.IsNoScript() {
		return nil, fmt.Errorf("%w: %w", retryshare.ErrNoScript, err)
	}
	return v, err
}
