package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
	"github.com/go-ratelimit/ratelimit/nethttp"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.live = isTerminal(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	addr     string        // where the server listens
	limit    int64         // requests per window, the same for every algorithm
	window   time.Duration // the window of the limit
	duration time.Duration // about how long the traffic runs
	serve    bool          // keep serving after the demo
	live     bool          // redraw one progress line on stderr (a terminal)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: go run ./examples/demo [flags]\n\n"+
			"Starts a server with the four rate-limiting algorithms side by side, sends them\n"+
			"the same traffic over HTTP, and draws what each one admitted.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "listen `address` (port 0 picks a free port)")
	fs.Int64Var(&cfg.limit, "limit", 10, "requests admitted per window, by every algorithm")
	fs.DurationVar(&cfg.window, "window", time.Second, "the window of the limit")
	fs.DurationVar(&cfg.duration, "duration", 6*time.Second, "how long the traffic runs, at least 4 windows")
	fs.BoolVar(&cfg.serve, "serve", false, "keep serving afterwards, for curl, until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("demo: unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	return cfg, cfg.check()
}

// check rejects settings the demo cannot show well.
func (c config) check() error {
	switch {
	case c.limit < 1:
		return fmt.Errorf("demo: -limit must be at least 1, got %d", c.limit)
	case c.window < 100*time.Millisecond:
		return fmt.Errorf("demo: -window must be at least 100ms, got %v", c.window)
	case c.window/time.Duration(2*c.limit) < time.Millisecond:
		return fmt.Errorf("demo: -limit %d per -window %v means sending %d requests per %v to each endpoint, faster than one per millisecond; raise -window or lower -limit",
			c.limit, c.window, 2*c.limit, c.window)
	case c.duration < 4*c.window:
		return fmt.Errorf("demo: -duration must be at least 4 windows (%v), got %v", 4*c.window, c.duration)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run is the whole demo: it starts the server, prints what is about to
// happen, sends the traffic, draws the results, and with -serve keeps
// serving until ctx ends. It returns what it drew.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (report, error) {
	if err := cfg.check(); err != nil {
		return report{}, err
	}
	srv, err := startServer(cfg)
	if err != nil {
		return report{}, err
	}
	defer srv.close()

	p := newPlan(cfg.limit, cfg.window, cfg.duration)
	intro(stdout, p, srv.url, srv.endpoints)
	start := nextBoundary(time.Now(), cfg.window)
	stopProgress := showProgress(stderr, cfg.live, start, p, srv.endpoints)
	lag, err := drive(ctx, srv.url, srv.endpoints, start, p)
	stopProgress()
	if errors.Is(err, context.Canceled) {
		return report{}, errors.New("demo: interrupted")
	}
	if err != nil {
		return report{}, fmt.Errorf("demo: %w", err)
	}

	rep := report{start: start, plan: p, lag: lag}
	for _, ep := range srv.endpoints {
		rep.results = append(rep.results, ep.result())
	}
	render(stdout, rep)

	if !cfg.serve {
		return rep, nil
	}
	fmt.Fprintf(stdout, "\nStill serving (-serve). Try a few times in a row:\n\n")
	for _, ep := range srv.endpoints {
		fmt.Fprintf(stdout, "  curl -i %s%s\n", srv.url, ep.path)
	}
	fmt.Fprintf(stdout, "\nPress Ctrl-C to stop.\n")
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "\nStopping.")
		return rep, nil
	case err := <-srv.serveErr:
		return rep, fmt.Errorf("demo: server stopped: %w", err)
	}
}

// endpoint is one algorithm mounted on the server.
type endpoint struct {
	path    string // "/fixed"
	title   string // "Fixed window"
	limiter *core.MemoryLimiter
	journal journal // the server's view
	counts  counts  // the client's view
}

func (ep *endpoint) result() result {
	return result{
		path:     ep.path,
		title:    ep.title,
		policy:   ep.limiter.Policy(),
		sent:     ep.counts.sent.Load(),
		admitted: ep.counts.admitted.Load(),
		denied:   ep.counts.denied.Load(),
		failed:   ep.counts.failed.Load(),
		requests: ep.journal.snapshot(),
	}
}

type server struct {
	url       string
	endpoints []*endpoint
	http      *http.Server
	serveErr  chan error
}

// startServer mounts one in-memory limiter per algorithm, all with the same
// "limit per window", each behind the HTTP middleware, and starts serving.
func startServer(cfg config) (_ *server, err error) {
	s := &server{}
	defer func() {
		if err != nil {
			s.closeLimiters()
		}
	}()
	mux := http.NewServeMux()
	for _, ep := range []struct {
		path, title string
		policy      core.Policy
	}{
		{"/fixed", "Fixed window", core.FixedWindow(cfg.limit, cfg.window)},
		{"/sliding", "Sliding window", core.SlidingWindow(cfg.limit, cfg.window)},
		{"/token", "Token bucket", core.TokenBucket(cfg.limit, cfg.window)},
		{"/leaky", "Leaky bucket", core.LeakyBucket(cfg.limit, cfg.window)},
	} {
		lim, err := core.New(ep.policy)
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		e := &endpoint{path: ep.path, title: ep.title, limiter: lim}
		s.endpoints = append(s.endpoints, e)
		// Keyed on the client's IP address (the default): all of the
		// demo's traffic comes from 127.0.0.1, so it shares one quota per
		// endpoint. Both header styles, for curl -i.
		limit := nethttp.Middleware(lim, nethttp.WithHeaderStyle(nethttp.HeadersBoth))
		mux.Handle("GET "+ep.path, e.journal.record(limit(hello(e.title, ep.policy))))
	}
	mux.Handle("GET /{$}", index(s))

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s.url = "http://" + dialable(ln.Addr().(*net.TCPAddr))
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.http.Serve(ln) }()
	return s, nil
}

// dialable turns a listening address into one a client can connect to:
// a server listening on every interface (":8080") is reached on loopback.
func dialable(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(a.Port))
	}
	return a.String()
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	s.closeLimiters()
}

func (s *server) closeLimiters() {
	for _, ep := range s.endpoints {
		_ = ep.limiter.Close()
	}
}

// hello is the application behind each limit: it answers what let it in.
func hello(title string, p core.Policy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		markServed(r)
		fmt.Fprintf(w, "admitted by the %s: %v\n", strings.ToLower(title), p)
	})
}

func index(s *server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "The same limit, four algorithms:")
		for _, ep := range s.endpoints {
			fmt.Fprintf(w, "  %s%-9s %v\n", s.url, ep.path, ep.limiter.Policy())
		}
	})
}

// showProgress keeps one line on w up to date while the traffic runs (or,
// when w is not a terminal, prints a line as each phase begins), until the
// returned function is called.
func showProgress(w io.Writer, live bool, start time.Time, p plan, eps []*endpoint) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		lastPhase, width := "", 0
		for {
			elapsed := time.Since(start)
			phase := p.phaseAt(elapsed)
			if live {
				var sent, admitted, denied int64
				for _, ep := range eps {
					sent += ep.counts.sent.Load()
					admitted += ep.counts.admitted.Load()
					denied += ep.counts.denied.Load()
				}
				// Short enough for an 80-column terminal: a wrapped line
				// cannot be redrawn with a carriage return.
				line := fmt.Sprintf("%s %4.1fs  %-24s  %d sent, %d ok, %d denied",
					meter(elapsed, p.end(), 10), max(elapsed, 0).Seconds(), phase, sent, admitted, denied)
				fmt.Fprintf(w, "\r%-*s", width, line)
				width = max(width, len([]rune(line)))
			} else if phase != lastPhase {
				fmt.Fprintf(w, "demo: %s\n", phase)
			}
			lastPhase = phase
			select {
			case <-tick.C:
			case <-done:
				if live {
					fmt.Fprintf(w, "\r%*s\r", width, "")
				}
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// meter is a progress bar of the given width.
func meter(done, total time.Duration, width int) string {
	n := int(int64(width) * int64(min(max(done, 0), total)) / int64(total))
	return "▕" + strings.Repeat("█", n) + strings.Repeat("·", width-n) + "▏"
}

// phaseAt names what the traffic is doing at offset t.
func (p plan) phaseAt(t time.Duration) string {
	switch {
	case t < 0:
		return "aligning to a window"
	case t < p.steady:
		return "phase 1: steady overload"
	case t < p.boundary-p.span:
		return "quiet: limiters recover"
	case t < p.boundary+p.span:
		return "phase 2: boundary bursts"
	}
	return "last answers"
}
