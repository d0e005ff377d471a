package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// High availability: a primary with a replica watched by three Sentinels,
// a Redis Cluster with a replica per master, and slot migration, all as
// real processes on loopback ports, for tests that kill a primary or move
// slots under load.

// haTimeout bounds every wait of this file: a Sentinel's discovery of its
// peers (hello messages every 2s), a cluster's convergence, a failover.
const haTimeout = 60 * time.Second

// Sentinel is a primary, its replica and three Sentinels monitoring them
// under MasterName, all owned by one test.
type Sentinel struct {
	MasterName string
	Master     *Server
	Replica    *Server
	// Sentinels are the Sentinel processes; SentinelAddrs their addresses,
	// for redis.FailoverOptions.
	Sentinels     []*Server
	SentinelAddrs []string
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary must be unreachable before a failover starts.
	DownAfter time.Duration

	link *Relay // the replica's connection to the primary goes through it
}

// DelayReplication makes the replication stream reach the replica d after
// the primary sent it, as over a slow link: from then on the replica is
// about d behind. When the primary dies, what the link still holds is
// lost, as the unsent part of a primary's replication buffer would be. A
// replica that stays d behind for long falls out of sync; this is for the
// moments before killing the primary.
func (s *Sentinel) DelayReplication(d time.Duration) { s.link.SetDelay(d) }

// StartSentinel starts a primary, a replica of it and three Sentinels (a
// quorum of two) with down-after-milliseconds set to downAfter, and waits
// until the replica is in sync and every Sentinel knows the replica and
// the two other Sentinels, so that killing the primary promotes the
// replica. Everything is stopped when t ends.
func StartSentinel(t testing.TB, downAfter time.Duration) *Sentinel {
	t.Helper()
	need(t, "redis-server")
	s := &Sentinel{MasterName: "ratelimit-ha", DownAfter: downAfter}
	// No delay before the initial sync (Redis 7 waits 5s by default for
	// more replicas to share one diskless transfer).
	s.Master = Start(t, "--repl-diskless-sync-delay", "0")
	s.link = StartRelay(t, s.Master.Addr)
	_, port, _ := net.SplitHostPort(s.link.Addr())
	// The replica replicates through the link; it tells the primary its
	// own port, so the primary and the Sentinels know its real address.
	s.Replica = Start(t, "--replicaof", "127.0.0.1", port)
	for range 3 {
		dir := t.TempDir()
		sen := startProcess(t, dir, false, func(port int) []string {
			conf := filepath.Join(dir, "sentinel.conf")
			text := strings.Join([]string{
				"port " + strconv.Itoa(port),
				"bind 127.0.0.1",
				"dir " + dir,
				"logfile " + filepath.Join(dir, "sentinel.log"),
				fmt.Sprintf("sentinel monitor %s %s 2", s.MasterName, strings.Replace(s.Master.Addr, ":", " ", 1)),
				fmt.Sprintf("sentinel down-after-milliseconds %s %d", s.MasterName, downAfter.Milliseconds()),
				// A Sentinel makes a replica that names another primary
				// address (the link's) replicate from the primary directly
				// once failover-timeout has passed since it saw it: a minute
				// is longer than any test.
				fmt.Sprintf("sentinel failover-timeout %s %d", s.MasterName, 60_000),
				fmt.Sprintf("sentinel parallel-syncs %s 1", s.MasterName),
			}, "\n") + "\n"
			// A Sentinel rewrites its configuration file: it must be
			// its own and writable.
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			return []string{conf, "--sentinel"}
		})
		s.Sentinels = append(s.Sentinels, sen)
		s.SentinelAddrs = append(s.SentinelAddrs, sen.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	if err := waitReplicaInSync(ctx, s.Master.Addr, s.Replica.Addr); err != nil {
		t.Fatalf("redistest: replica %s: %v", s.Replica.Addr, err)
	}
	for _, addr := range s.SentinelAddrs {
		err := poll(ctx, func() error {
			c := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			m, err := c.Master(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || m["flags"] != "master" {
				return fmt.Errorf("sentinel sees replicas=%s other sentinels=%s flags=%s", m["num-slaves"], m["num-other-sentinels"], m["flags"])
			}
			return nil
		})
		if err != nil {
			t.Fatalf("redistest: sentinel %s not ready within %v: %v", addr, haTimeout, err)
		}
	}
	return s
}

// WaitFailover waits until a Sentinel names a primary other than the
// original one and that server acts as a primary, and returns its address.
func (s *Sentinel) WaitFailover(ctx context.Context) (string, error) {
	var promoted string
	err := poll(ctx, func() error {
		for _, addr := range s.SentinelAddrs {
			c := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
			hp, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
			_ = c.Close()
			if err != nil || len(hp) != 2 {
				continue
			}
			if a := net.JoinHostPort(hp[0], hp[1]); a != s.Master.Addr {
				if err := isMaster(ctx, a); err != nil {
					return err
				}
				promoted = a
				return nil
			}
		}
		return fmt.Errorf("every sentinel still names %s", s.Master.Addr)
	})
	return promoted, err
}

// ReplicatedCluster is a Redis Cluster of masters each with one replica.
type ReplicatedCluster struct {
	// Masters[i]'s replica is Replicas[i].
	Masters  []*Server
	Replicas []*Server
	// NodeTimeout is the nodes' cluster-node-timeout: how long a master
	// must be unreachable before it is marked failed and its replica
	// takes over.
	NodeTimeout time.Duration
}

// Addrs returns the addresses of all nodes, masters first.
func (c *ReplicatedCluster) Addrs() []string {
	var out []string
	for _, s := range append(append([]*Server(nil), c.Masters...), c.Replicas...) {
		out = append(out, s.Addr)
	}
	return out
}

// ClusterWithReplicas starts a Redis Cluster of three masters and three
// replicas (one per master, through redis-cli --cluster create
// --cluster-replicas 1) with cluster-node-timeout set to nodeTimeout, waits
// until every node sees the whole cluster with every replica in sync, and
// stops it when t ends.
func ClusterWithReplicas(t testing.TB, nodeTimeout time.Duration) *ReplicatedCluster {
	t.Helper()
	need(t, "redis-server")
	need(t, "redis-cli")
	var nodes []*Server
	for range 6 {
		dir := t.TempDir()
		nodes = append(nodes, startProcess(t, dir, true, func(port int) []string {
			return clusterNodeArgs(port, dir, nodeTimeout)
		}))
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	byAddr := map[string]*Server{}
	for _, n := range nodes {
		byAddr[n.Addr] = n
	}
	c := &ReplicatedCluster{NodeTimeout: nodeTimeout}
	// Wait until every node sees three masters with a connected replica
	// each, then pair them up.
	for _, addr := range addrs {
		err := poll(ctx, func() error {
			pairs, err := masterReplicaPairs(ctx, addr)
			if err != nil {
				return err
			}
			if len(pairs) != 3 {
				return fmt.Errorf("%d masters with a connected replica: %v", len(pairs), pairs)
			}
			if c.Masters == nil {
				for m, r := range pairs {
					c.Masters = append(c.Masters, byAddr[m])
					c.Replicas = append(c.Replicas, byAddr[r])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("redistest: cluster node %s: %v", addr, err)
		}
	}
	for i, r := range c.Replicas {
		if err := waitReplicaInSync(ctx, c.Masters[i].Addr, r.Addr); err != nil {
			t.Fatalf("redistest: cluster replica %s: %v", r.Addr, err)
		}
	}
	for _, addr := range addrs {
		if err := waitClusterOK(ctx, addr); err != nil {
			t.Fatalf("redistest: cluster node %s: %v", addr, err)
		}
	}
	if err := WaitClusterAgrees(ctx, addrs[0]); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// WaitPromoted waits until Replicas[i] has taken over from Masters[i] (it
// is a master) and every node but Masters[i] reports cluster_state:ok.
func (c *ReplicatedCluster) WaitPromoted(ctx context.Context, i int) error {
	if err := poll(ctx, func() error { return isMaster(ctx, c.Replicas[i].Addr) }); err != nil {
		return err
	}
	for j, s := range append(append([]*Server(nil), c.Masters...), c.Replicas...) {
		if j == i {
			continue
		}
		if err := waitClusterOK(ctx, s.Addr); err != nil {
			return fmt.Errorf("node %s: %w", s.Addr, err)
		}
	}
	return nil
}

// SlotOwners returns, for each of the 16384 slots, the address of the
// master serving it according to the node at addr.
func SlotOwners(ctx context.Context, addr string) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	owners := make([]string, 16384)
	for _, sh := range shards {
		master := ""
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				master = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			}
		}
		for _, r := range sh.Slots {
			for s := r.Start; s <= r.End && master != ""; s++ {
				owners[s] = master
			}
		}
	}
	return owners, nil
}

// Reshard moves n slots from the master at from to the master at to, keys
// included, with redis-cli --cluster reshard (the slots it picks are the
// lowest ones from holds), and waits until every node agrees on the new
// layout.
func Reshard(ctx context.Context, from, to string, n int) error {
	fromID, err := nodeID(ctx, from)
	if err != nil {
		return err
	}
	toID, err := nodeID(ctx, to)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "reshard", from,
		"--cluster-from", fromID, "--cluster-to", toID,
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes").CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	return WaitClusterAgrees(ctx, from)
}

// WaitClusterAgrees waits until redis-cli --cluster check, run against the
// node at addr, finds every node agreeing on the slots and every slot
// covered: the state in which redis-cli --cluster reshard may start.
func WaitClusterAgrees(ctx context.Context, addr string) error {
	return poll(ctx, func() error {
		out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "check", addr).CombinedOutput()
		if err != nil || strings.Contains(string(out), "[ERR]") || strings.Contains(string(out), "[WARNING]") {
			return fmt.Errorf("redis-cli --cluster check: %v\n%s", err, out)
		}
		return nil
	})
}

// startProcess starts a redis-server with the arguments args gives for a
// free port (with bus, port+10000 free too), retrying with another port when
// the first was taken in between, and stops it when t ends.
func startProcess(t testing.TB, dir string, bus bool, args func(port int) []string) *Server {
	t.Helper()
	var lastErr error
	for range 5 {
		port, err := freePort(bus)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t, dir: dir, args: args(port)}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: cannot start redis-server: %v", lastErr)
	return nil
}

func clusterNodeArgs(port int, dir string, nodeTimeout time.Duration) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		"--repl-diskless-sync-delay", "0",
	}
}

// masterReplicaPairs reads CLUSTER NODES at addr and returns, for each
// master serving slots, the address of its connected replica.
func masterReplicaPairs(ctx context.Context, addr string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	type node struct{ addr, flags, master, link string }
	byID := map[string]node{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		a := f[1]
		if i := strings.IndexAny(a, "@,"); i >= 0 {
			a = a[:i]
		}
		byID[f[0]] = node{addr: a, flags: f[2], master: f[3], link: f[7]}
	}
	pairs := map[string]string{}
	for _, n := range byID {
		if !strings.Contains(n.flags, "slave") || strings.Contains(n.flags, "fail") || n.link != "connected" {
			continue
		}
		if m, ok := byID[n.master]; ok && strings.Contains(m.flags, "master") && !strings.Contains(m.flags, "fail") {
			pairs[m.addr] = n.addr
		}
	}
	return pairs, nil
}

func nodeID(ctx context.Context, addr string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	return c.Do(ctx, "cluster", "myid").Text()
}

// waitReplicaInSync waits until the replica at replica reports its link
// to the primary up and the primary at primary reports that replica online
// (the initial sync over, the replication stream flowing): before that, a
// promoted replica would have none of the writes made since the sync began.
func waitReplicaInSync(ctx context.Context, primary, replica string) error {
	r := redis.NewClient(&redis.Options{Addr: replica, MaxRetries: -1})
	defer r.Close()
	p := redis.NewClient(&redis.Options{Addr: primary, MaxRetries: -1})
	defer p.Close()
	_, port, _ := net.SplitHostPort(replica)
	return poll(ctx, func() error {
		info, err := r.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica not in sync: %q", info)
		}
		info, err = p.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if strings.HasPrefix(line, "slave") && strings.Contains(line, "port="+port+",") && strings.Contains(line, "state=online") {
				return nil
			}
		}
		return fmt.Errorf("primary does not see the replica online: %q", info)
	})
}

// isMaster reports an error unless the server at addr answers ROLE with
// "master".
func isMaster(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	role, err := c.Do(ctx, "role").Slice()
	if err != nil {
		return err
	}
	if len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("%s has role %v", addr, role)
	}
	return nil
}

// poll calls check every 20ms until it returns nil or ctx ends, and then
// returns check's last error.
func poll(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Logs returns what the server wrote to its log file so far, for a test's
// failure message.
func (s *Server) Logs() string { return s.log() }
