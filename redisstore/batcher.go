package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/core"
)

// batcher sends the limiter's script calls to Redis from one goroutine,
// several calls at once when they come together.
//
// Why a goroutine at all: a caller waits for its answer with a timer, so a
// call returns within its timeout whatever the client does (go-redis honours
// a context's deadline on the socket only with ContextTimeoutEnabled, and
// retries on its own schedule otherwise).
//
// Why batches: the goroutine takes whatever calls queued up while the
// previous round trip was in flight and sends them as one pipeline, one
// write and one read for all of them. With 64 callers on 2 cores this
// about tripled throughput over sending each call alone (see "Performance"
// in doc.go). More than one sending goroutine measured no better: the
// batches get smaller.
//
// A call that finds fewer than maxDirect others in progress skips the
// batcher when the client honours context deadlines (Limiter.sendDirect):
// the two goroutine hand-offs cost little on an idle machine but up to tens
// of microseconds on a busy one, when the batcher wakes on the other core,
// and a pipeline of one or two saves nothing.
type batcher struct {
	rdb      redis.UniversalClient
	timeout  time.Duration
	maxBatch int
	queue    chan *call
	stop     chan struct{}
	done     chan struct{} // closed when run returns
}

// defaultMaxBatch is how many calls one pipeline carries at most.
const defaultMaxBatch = 256

// call is one script call on its way through the batcher. The caller
// builds the command; the batcher fills in the reply and signals done.
type call struct {
	cmd    *redis.Cmd
	script bool   // cmd runs a script: parse its reply into res
	src    string // the script's source, for EVAL
	state  atomic.Int32
	res    core.Decision
	err    error
	done   chan struct{} // capacity 1: the batcher never blocks on it
	timer  *time.Timer   // the caller's deadline, reused with the call
}

const (
	callPending   = iota // queued, not yet sent
	callSent             // taken by the batcher: it will answer
	callAbandoned        // the caller gave up before it was sent: skipped
)

var callPool = sync.Pool{New: func() any {
	c := &call{done: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	c.timer.Stop()
	return c
}}

func getCall() *call {
	c := callPool.Get().(*call)
	c.state.Store(callPending)
	c.res, c.err = core.Decision{}, nil
	return c
}

// putCall recycles a call whose answer the caller has read. A call the
// caller gave up on is never recycled: the batcher may still write to it.
func putCall(c *call) {
	c.timer.Stop()
	c.cmd, c.script, c.src = nil, false, ""
	callPool.Put(c)
}

func newBatcher(rdb redis.UniversalClient, timeout time.Duration, maxBatch int) *batcher {
	b := &batcher{
		rdb:      rdb,
		timeout:  timeout,
		maxBatch: maxBatch,
		queue:    make(chan *call, 4*maxBatch),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.run()
	return b
}

func (b *batcher) run() {
	defer close(b.done)
	batch := make([]*call, 0, b.maxBatch)
	for {
		select {
		case c := <-b.queue:
			batch = append(batch[:0], c)
		case <-b.stop:
			return
		}
	fill:
		for len(batch) < b.maxBatch {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		b.send(batch)
		clear(batch)
	}
}

// send runs one batch: the calls whose callers still wait.
func (b *batcher) send(batch []*call) {
	live := batch[:0]
	for _, c := range batch {
		if c.state.CompareAndSwap(callPending, callSent) {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	b.exec(ctx, live)
	for _, c := range live {
		c.done <- struct{}{}
	}
}

// exec runs the calls' commands, as one command or one pipeline, then
// again with EVAL for those whose server did not have the script, and
// fills in each call's reply.
func (b *batcher) exec(ctx context.Context, calls []*call) {
	b.process(ctx, calls, func(c *call) *redis.Cmd { return c.cmd })
	var missing []*call
	for _, c := range calls {
		if isNoScript(c.cmd.Err()) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		// EVAL runs the script from source and caches it on that
		// server, so the next EVALSHA there succeeds.
		b.process(ctx, missing, evalOf)
	}
	for _, c := range calls {
		cmd := c.cmd
		if c.err = cmd.Err(); c.err == nil && c.script {
			c.err = parseReply(cmd.Val(), &c.res)
		}
	}
}

// process sends the commands of calls, replacing each call's cmd by the
// one sent.
func (b *batcher) process(ctx context.Context, calls []*call, cmdOf func(*call) *redis.Cmd) {
	if len(calls) == 1 {
		c := calls[0]
		c.cmd = cmdOf(c)
		_ = b.rdb.Process(ctx, c.cmd)
		return
	}
	pipe := b.rdb.Pipeline()
	for _, c := range calls {
		c.cmd = cmdOf(c)
		_ = pipe.Process(ctx, c.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
}

// evalOf returns the EVAL form of a call's EVALSHA command.
func evalOf(c *call) *redis.Cmd {
	args := append([]any(nil), c.cmd.Args()...)
	args[0] = "eval"
	args[1] = c.src
	cmd := redis.NewCmd(context.Background(), args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

func (b *batcher) close() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
}
