package transport

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// router is the Sender of a Cluster client: once the client knows the
// slots, a call goes to its node's batcher (routeNode), so that each
// node's calls go together and wait for that node alone; until then, and
// after a server rejected the cross-slot form, to its batcher of
// routeCluster.
type router struct {
	*batcher
	mu    sync.Mutex
	nodes map[*redis.Client]*batcher
}

// Send runs c on its node's batcher when the slots are known (which needs
// no round trip).
func (cl *router) Send(ctx context.Context, c *Call) error {
	if cl.routed.Load() && !cl.noCross.Load() {
		if n, err := cl.cluster.MasterForKey(ctx, c.Key); err == nil {
			return cl.node(n).Send(ctx, c)
		}
	}
	return cl.batcher.Send(ctx, c)
}

// node returns the batcher of a Cluster node, made on first use.
func (cl *router) node(n *redis.Client) *batcher {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	nb := cl.nodes[n]
	if nb == nil {
		nb = &batcher{conf: cl.conf, route: routeNode}
		cl.nodes[n] = nb
	}
	return nb
}

// nodeBatchers returns the nodes' batchers made so far.
func (cl *router) nodeBatchers() []*batcher {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Collect(maps.Values(cl.nodes))
}

// Close closes every node's batcher, then the client. The batcher of
// routeCluster stops first: its round trips in flight may make node
// batchers, which then stop too.
func (cl *router) Close() {
	cl.batcher.stop()
	for _, nb := range cl.nodeBatchers() {
		nb.stop()
	}
	if cl.closeRDB {
		_ = cl.rdb.Close()
	}
}
