package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-ratelimit/ratelimit/core"
)

// Picture size: at most maxCols columns (an 80-column terminal, less the
// axis labels), at most maxRows rows; beyond that a column covers more time
// and a block stands for more requests.
const (
	maxCols = 68
	maxRows = 8
)

// result is everything recorded about one endpoint.
type result struct {
	path, title string
	policy      core.Policy
	// What the client saw.
	sent, admitted, denied, failed int64
	// What the server saw.
	requests []request
}

// report is the input of render.
type report struct {
	start   time.Time // when phase 1 began: a window boundary
	plan    plan
	lag     time.Duration // how late the latest request went out
	results []result
}

// intro says what is about to happen, before the traffic starts.
func intro(w io.Writer, p plan, url string, eps []*endpoint) {
	fmt.Fprintf(w, "Four rate-limiting algorithms, one limit: %d requests per %v.\n\n", p.limit, p.window)
	fmt.Fprintf(w, "Server %s (in-memory limiters, net/http middleware):\n", url)
	for _, ep := range eps {
		fmt.Fprintf(w, "  %-9s %v\n", ep.path, ep.limiter.Policy())
	}
	fmt.Fprintf(w, "\nThe same traffic goes to each endpoint, over HTTP:\n")
	fmt.Fprintf(w, "  phase 1  %s for %v, twice the limit\n", p.rate(), p.steady)
	fmt.Fprintf(w, "  phase 2  %d requests just before a window boundary and %d just after,\n", p.limit, p.limit)
	fmt.Fprintf(w, "           each burst spread over %v\n\n", p.span)
}

// render draws one picture per algorithm, then the summary table.
func render(w io.Writer, rep report) {
	g := newGrid(rep)
	charts := make([][]bar, len(rep.results))
	unit := 1 // requests per block
	for i, r := range rep.results {
		charts[i] = g.bars(r)
		for _, b := range charts[i] {
			unit = max(unit, ceilDiv(b.admitted+b.denied, maxRows))
		}
	}
	rows := 1
	for _, bars := range charts {
		for _, b := range bars {
			rows = max(rows, b.cells(unit))
		}
	}

	block := "one block = one request"
	if unit > 1 {
		block = fmt.Sprintf("one block = up to %d requests", unit)
	}
	fmt.Fprintf(w, "Each column is %v; its height is the number of requests in it.\n", g.slice)
	fmt.Fprintf(w, "█ admitted (drawn when served)   ░ denied (429)   %s\n", block)
	fmt.Fprintf(w, "┴ window boundary, every %v (aligned to the clock, like the limiters)\n", rep.plan.window)
	for i, r := range rep.results {
		fmt.Fprintf(w, "\n%s  %s  (%v)\n\n", strings.ToUpper(r.title), r.path, r.policy)
		g.draw(w, charts[i], rows, unit, rep.plan)
		fmt.Fprintln(w)
		wrap(w, caption(rep, r, g.busiest(charts[i])), "  ")
	}
	fmt.Fprintln(w)
	table(w, rep, g, charts)
	if rep.lag > g.slice/2 {
		fmt.Fprintln(w)
		wrap(w, fmt.Sprintf("Note: this machine was busy. Some requests went out up to %v late, "+
			"so the pictures are less regular than the algorithms are; run the demo again "+
			"on a quieter machine to see them clearly.", rep.lag.Round(time.Millisecond)), "")
	}
	fmt.Fprint(w, `
In short:
  fixed window    cheapest; lets up to 2× the limit through across a boundary
  sliding window  no boundary burst: at most limit × (1 + 1/buckets) per window
  token bucket    lets a burst up to its capacity through, then the refill rate
  leaky bucket    a steady output: admitted requests wait instead of bursting
`)
}

// grid maps time to the columns of the pictures.
type grid struct {
	start     time.Time     // column 0 begins here, at the start of phase 1
	slice     time.Duration // how long one column covers
	perWindow int           // columns per window
	cols      int
}

// newGrid gives each column a tenth of a window (a sliding-window bucket),
// or more when the run would not fit maxCols.
func newGrid(rep report) grid {
	p := rep.plan
	end := p.end()
	for _, r := range rep.results {
		for _, q := range r.requests {
			end = max(end, q.shown().Sub(rep.start))
		}
	}
	end = min(end, p.end()+p.window) // a request later still goes in the last column
	var g grid
	for _, n := range []int{10, 5, 2, 1} {
		g = grid{start: rep.start, slice: p.window / time.Duration(n), perWindow: n}
		g.cols = int(ceilDiv(end, g.slice))
		if g.cols <= maxCols {
			break
		}
	}
	return g
}

// column is the column of an offset from the start.
func (g grid) column(d time.Duration) int { return min(max(0, int(d/g.slice)), g.cols-1) }

// bar is one column of a picture: the requests of one time slice.
type bar struct{ admitted, denied int }

func (b bar) cells(unit int) int { return ceilDiv(b.admitted, unit) + ceilDiv(b.denied, unit) }

func ceilDiv[N int | time.Duration](a, b N) N { return (a + b - 1) / b }

// shown is when a request appears in the picture: when it was served if it
// was admitted (a leaky bucket serves later than it decides), else when it
// was denied.
func (q request) shown() time.Time {
	if q.served.IsZero() {
		return q.arrived
	}
	return q.served
}

func (g grid) bars(r result) []bar {
	bars := make([]bar, g.cols)
	for _, q := range r.requests {
		b := &bars[g.column(q.shown().Sub(g.start))]
		if q.served.IsZero() {
			b.denied++
		} else {
			b.admitted++
		}
	}
	return bars
}

// busiest is the most requests admitted in any window's worth of
// consecutive columns.
func (g grid) busiest(bars []bar) int {
	best, sum := 0, 0
	for i, b := range bars {
		sum += b.admitted
		if i >= g.perWindow {
			sum -= bars[i-g.perWindow].admitted
		}
		best = max(best, sum)
	}
	return best
}

// draw draws the bars as stacked columns, admitted at the bottom and denied
// above, over a time axis marking the window boundaries and a ruler naming
// the phases of the traffic.
func (g grid) draw(w io.Writer, bars []bar, rows, unit int, p plan) {
	for row := rows; row >= 1; row-- {
		label := ""
		if row == rows {
			label = fmt.Sprint(rows * unit)
		}
		var line strings.Builder
		for _, b := range bars {
			a, d := ceilDiv(b.admitted, unit), ceilDiv(b.denied, unit)
			switch {
			case row <= a:
				line.WriteString("█")
			case row <= a+d:
				line.WriteString("░")
			default:
				line.WriteString(" ")
			}
		}
		fmt.Fprintf(w, "%5s │%s\n", label, strings.TrimRight(line.String(), " "))
	}

	var axis, times strings.Builder
	for i := range bars {
		if i%g.perWindow == 0 {
			axis.WriteString("┴")
		} else {
			axis.WriteString("─")
		}
	}
	written := 0 // columns of the times line written so far
	for i := 0; i < len(bars); i += g.perWindow {
		label := (time.Duration(i/g.perWindow) * p.window).String()
		if i > 0 && i <= written {
			continue // no room left by the previous label
		}
		times.WriteString(strings.Repeat(" ", i-written) + label)
		written = i + len(label)
	}
	fmt.Fprintf(w, "%5s └%s\n", "0", axis.String())
	fmt.Fprintf(w, "%5s  %s\n", "", times.String())
	fmt.Fprintf(w, "%5s  %s\n", "", g.phases(p))
}

// phases is a ruler under the time axis naming the two phases.
func (g grid) phases(p plan) string {
	ruler := []rune(strings.Repeat(" ", g.cols+20))
	// bracket marks [from, to) and writes the first label that fits inside,
	// or else the last one just after it.
	bracket := func(from, to time.Duration, labels ...string) {
		a := g.column(from)
		b := max(g.column(to-1), a+1)
		for i := a + 1; i < b; i++ {
			ruler[i] = '─'
		}
		ruler[a], ruler[b] = '├', '┤'
		for _, label := range labels {
			text := []rune(" " + label + " ")
			if inside := b - a - 1; inside >= len(text)+2 {
				copy(ruler[a+1+(inside-len(text))/2:], text)
				return
			}
		}
		copy(ruler[b+1:], []rune(" "+labels[len(labels)-1]))
	}
	bracket(0, p.steady, "phase 1: "+p.rate(), "phase 1")
	bracket(p.boundary-p.span, p.boundary+p.span, "phase 2: bursts")
	return strings.TrimRight(string(ruler), " ")
}

// caption explains what to see in an algorithm's picture, with the
// numbers of this run.
func caption(rep report, r result, busiest int) string {
	p, pol := rep.plan, r.policy
	interval := p.window / time.Duration(p.limit)
	first := r.admittedBetween(rep.start.Add(p.boundary-p.span), rep.start.Add(p.boundary))
	second := r.admittedBetween(rep.start.Add(p.boundary), rep.start.Add(p.boundary+p.span))
	switch pol.Algorithm {
	case core.AlgFixedWindow:
		return fmt.Sprintf("Counts the requests of each window and starts again from zero at every "+
			"boundary (┴). Under steady overload each window admits its first %d requests, then denies "+
			"the rest. Its weak spot is the boundary: the two bursts count in two different windows, so "+
			"%d + %d = %d were admitted within %v, against a limit of %d per %v.",
			p.limit, first, second, first+second, 2*p.span, p.limit, p.window)
	case core.AlgSlidingWindow:
		return fmt.Sprintf("Counts the trailing %v (in %d buckets of %v). Under steady overload it admits "+
			"the limit too, but only as fast as old requests slide out of the window. And there is no "+
			"boundary to exploit: the first burst takes the quota (%d admitted), and the second finds it "+
			"still in use (%d admitted). No stretch of %v can hold more than %d + %d/%d = %d; the "+
			"busiest held %d.",
			p.window, pol.Buckets, pol.Interval(), first, second, p.window, pol.Limit, pol.Limit,
			pol.Buckets, pol.Limit+pol.Limit/pol.Buckets, busiest)
	case core.AlgTokenBucket:
		return fmt.Sprintf("Starts full with %d tokens and gains one every %v. Under steady overload it "+
			"first spends what it saved (%d admitted in the first %v), then settles at the refill rate: "+
			"one request every %v. The first burst spends a full bucket (%d admitted); the second gets "+
			"only what refilled meanwhile (%d).",
			pol.Burst, interval, r.admittedBetween(rep.start, rep.start.Add(p.window)), p.window,
			interval, first, second)
	case core.AlgLeakyBucket:
		p50, worst := r.delays()
		return fmt.Sprintf("Admitted requests queue in the bucket and leave one every %v: the middleware "+
			"holds each for its Decision.Delay (median %v, at most %v here) before the handler runs. So "+
			"what reaches the handler is a steady %d per %v, whatever arrives. A request that finds %d "+
			"already queued is denied at once.",
			interval, p50, worst, p.limit, p.window, pol.Burst)
	}
	return ""
}

// admittedBetween counts the requests admitted (decided, not served) in
// [from, to).
func (r result) admittedBetween(from, to time.Time) int {
	n := 0
	for _, q := range r.requests {
		if !q.served.IsZero() && !q.arrived.Before(from) && q.arrived.Before(to) {
			n++
		}
	}
	return n
}

// delays returns the median and the longest time admitted requests were held
// before being served, to the millisecond.
func (r result) delays() (p50, worst time.Duration) {
	var ds []time.Duration
	for _, q := range r.requests {
		if !q.served.IsZero() {
			ds = append(ds, q.served.Sub(q.arrived).Round(time.Millisecond))
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

// table summarises every algorithm on one line each.
func table(w io.Writer, rep report, g grid, charts [][]bar) {
	failed := false
	for _, r := range rep.results {
		failed = failed || r.failed > 0
	}
	head := fmt.Sprintf("%-16s %6s %9s %7s  %12s %10s %10s", "", "sent", "admitted", "denied",
		"busiest "+rep.plan.window.String(), "delay p50", "delay max")
	if failed {
		head += fmt.Sprintf(" %7s", "errors")
	}
	fmt.Fprintln(w, head)
	for i, r := range rep.results {
		p50, worst := "-", "-"
		if r.policy.Algorithm == core.AlgLeakyBucket && !r.policy.Meter {
			a, b := r.delays()
			p50, worst = a.String(), b.String()
		}
		line := fmt.Sprintf("%-16s %6d %9d %7d  %12d %10s %10s", r.title, r.sent, r.admitted, r.denied,
			g.busiest(charts[i]), p50, worst)
		if failed {
			line += fmt.Sprintf(" %7d", r.failed)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	wrap(w, fmt.Sprintf("busiest %v: the most requests served in any %d consecutive columns of the "+
		"picture; the limit is %d.", rep.plan.window, g.perWindow, rep.plan.limit), "")
}

// wrap writes text in lines that fit 78 columns, each after indent.
func wrap(w io.Writer, text, indent string) {
	const width = 78
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len([]rune(line))+1+len([]rune(word)) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	if line != indent {
		fmt.Fprintln(w, line)
	}
}
