package transport

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/redisstore/internal/script"
)

// route says how the calls of one round trip are grouped into script calls.
type route uint8

const (
	// routeOne: one server (a *redis.Client: a single node, or the primary
	// of a Sentinel failover client). All calls in one script call.
	routeOne route = iota
	// routeCluster: a *redis.ClusterClient that does not know the slots
	// yet: one script call per node, in a cluster pipeline.
	routeCluster
	// routePerKey: any other client (a Ring shards keys by its own hash,
	// which this package cannot see). One script call per key.
	routePerKey
	// routeNode: the calls of one Cluster node, sent through the cluster
	// client: one script call, in the cross-slot form when it decides
	// several keys.
	routeNode
)

// group is one command of a round trip: a script call deciding calls, or
// a DEL.
type group struct {
	calls []*Call
	eval  bool // send the source (EVAL): the server lacked the script
	cmd   *redis.Cmd
}

// exec runs the calls of one round trip and fills in their answers: it
// sends their commands, then again those the server could not run as sent.
func (b *batcher) exec(ctx context.Context, calls []*Call) {
	id := roundTrips.Add(1)
	for _, c := range calls {
		c.rt.Store(id)
	}
	groups := b.group(ctx, calls)
	for round := 0; len(groups) > 0; round++ {
		for _, g := range groups {
			g.cmd = b.command(ctx, g)
		}
		b.process(ctx, groups)
		var again []*group
		for _, g := range groups {
			err := g.cmd.Err()
			switch {
			case err == nil || round >= 3 || g.calls[0].Del:
			case !g.eval && redis.HasErrorPrefix(err, "NOSCRIPT"):
				// The server does not have the script cached (restart,
				// failover, SCRIPT FLUSH). EVAL runs it from source and
				// caches it on that server, so the next EVALSHA there
				// succeeds.
				g.eval = true
				again = append(again, g)
				continue
			case b.cross(g.calls) && isClusterRefusal(err):
				// Nothing was written (every read comes before any
				// write): decide the keys one by one, through the
				// cluster client's MOVED and ASK handling.
				if isCompileError(err) {
					b.noCross.Store(true)
				}
				again = append(again, perKey(g.calls)...)
				continue
			}
			b.answer(g)
		}
		groups = again
	}
}

// group splits the calls of a round trip into commands, each call's
// order kept among the calls of its key.
func (b *batcher) group(ctx context.Context, calls []*Call) []*group {
	var groups []*group
	var decisions []*Call
	for _, c := range calls {
		if c.Del {
			groups = append(groups, &group{calls: []*Call{c}})
		} else {
			decisions = append(decisions, c)
		}
	}
	switch {
	case len(decisions) == 0:
		return groups
	case b.route == routeOne || b.route == routeNode && !b.noCross.Load():
		return append(groups, &group{calls: decisions})
	case b.route == routeCluster && !b.noCross.Load():
		return append(groups, groupBy(decisions, func(c *Call) *redis.Client {
			node, err := b.cluster.MasterForKey(ctx, c.Key)
			if err != nil {
				return nil // the cluster client reports the error on the call
			}
			b.routed.Store(true) // from now on Send routes by node
			return node
		})...)
	default:
		return append(groups, perKey(decisions)...)
	}
}

// perKey returns one group per key of calls, in order.
func perKey(calls []*Call) []*group {
	return groupBy(calls, func(c *Call) string { return c.Key })
}

// groupBy returns one group per value of key over calls, in the order of
// their first calls, each call's order kept.
func groupBy[K comparable](calls []*Call, key func(*Call) K) []*group {
	byKey := make(map[K]*group)
	var order []*group
	for _, c := range calls {
		k := key(c)
		g := byKey[k]
		if g == nil {
			g = &group{}
			byKey[k] = g
			order = append(order, g)
		}
		g.calls = append(g.calls, c)
	}
	return order
}

// cross reports whether calls, one command's, go in the cross-slot form:
// on a Cluster, those of several keys.
func (b *batcher) cross(calls []*Call) bool {
	return b.route != routeOne && slices.ContainsFunc(calls[1:], func(c *Call) bool { return c.Key != calls[0].Key })
}

// command builds the Redis command of g.
func (b *batcher) command(ctx context.Context, g *group) *redis.Cmd {
	if c := g.calls[0]; c.Del {
		args := []any{"del", c.Key}
		for _, q := range c.More {
			args = append(args, q.Key) // one slot: the user key's hash tag
		}
		return redis.NewCmd(ctx, args...) // routed by its first key, as go-redis routes DEL
	}
	return script.Command(ctx, &b.Script, g.calls, b.cross(g.calls), g.eval)
}

// process sends the commands of groups: one alone, several as a pipeline
// (which a cluster client splits by node and sends to each at once).
func (b *batcher) process(ctx context.Context, groups []*group) {
	if len(groups) == 1 || b.route == routeNode {
		// One node: rather than a cluster pipeline, which sends from a
		// goroutine per node that a busy process runs late, one command
		// after the other (there is one but for a Reset, or after a
		// refusal).
		for _, g := range groups {
			_ = b.rdb.Process(ctx, g.cmd)
		}
		return
	}
	pipe := b.rdb.Pipeline()
	for _, g := range groups {
		_ = pipe.Process(ctx, g.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
}

// answer fills in the answers of g's calls from its command.
func (b *batcher) answer(g *group) {
	err := g.cmd.Err()
	if err == nil && !g.calls[0].Del {
		err = script.Parse(g.cmd.Val(), g.calls)
	}
	unsent := isUnsent(err)
	for _, c := range g.calls {
		c.Err = err
		if unsent {
			c.rt.Store(0)
		}
	}
}

// isClusterRefusal reports whether err is Redis Cluster refusing a
// cross-slot script call before it changed anything: a key that another
// node serves or that is moving, or a server without the flag.
func isClusterRefusal(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false // no reply from the server: the script may have run
	}
	refused := func(prefix string) bool { return redis.HasErrorPrefix(err, prefix) }
	return slices.ContainsFunc([]string{"MOVED", "ASK", "TRYAGAIN", "CROSSSLOT"}, refused) ||
		strings.Contains(err.Error(), "non local key") || isCompileError(err)
}

// isCompileError reports whether err is a server refusing the cross-slot
// form's flag (Redis before 7.0).
func isCompileError(err error) bool {
	return strings.Contains(err.Error(), "Error compiling script") || strings.Contains(err.Error(), "shebang")
}

// isUnsent reports whether err says a command was never written because
// its deadline had passed: go-redis checks the context before it takes a
// connection (a deadline passing after that is the socket's,
// os.ErrDeadlineExceeded), and a readyConn refuses to write (errNotSent).
// Redis never saw it.
func isUnsent(err error) bool {
	return errors.Is(err, errNotSent) || errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded)
}
