package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress shows how far long work has got, on stderr: a bar redrawn in
// place when stderr is a terminal, plain lines otherwise (one per tenth of
// the work, so a log file stays short), nothing when disabled. Safe for
// concurrent use.
type progress struct {
	w       io.Writer // nil: disabled
	tty     bool
	label   string
	bytes   bool   // units are bytes (else items)
	unit    string // what items are, for an unknown total ("objects")
	start   time.Time
	mu      sync.Mutex
	total   int64
	done    int64
	drawn   time.Time // last bar redraw
	tenth   int64     // last tenth (or plainEvery) printed as a plain line
	lastLen int       // length of the bar line, to blank it
}

// redrawEvery bounds how often the bar is redrawn.
const redrawEvery = 100 * time.Millisecond

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress starts a progress display of label on w; enabled false (or a
// nil w) makes every method a no-op. total may be 0 if not yet known.
func newProgress(w io.Writer, enabled bool, label string, total int64, bytes bool) *progress {
	p := &progress{label: label, bytes: bytes, total: total, start: time.Now()}
	if enabled && w != nil {
		p.w, p.tty = w, isTerminal(w)
	}
	return p
}

// setTotal changes the amount of work expected.
func (p *progress) setTotal(total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
}

// add records n more units done.
func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(p.done + n)
}

// update records that done units of total are done.
func (p *progress) update(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
	p.set(done)
}

func (p *progress) set(done int64) {
	p.done = done
	if p.w == nil {
		return
	}
	if p.tty {
		if time.Since(p.drawn) >= redrawEvery {
			p.drawBar()
		}
		return
	}
	if p.total > 0 {
		tenth := min(10, p.done*10/p.total)
		if tenth > p.tenth {
			p.tenth = tenth
			fmt.Fprintf(p.w, "%s: %d%% (%s)\n", p.label, tenth*10, p.amount())
		}
		return
	}
	// Total unknown: a line every plainEvery units.
	if !p.bytes && p.done/plainEvery > p.tenth {
		p.tenth = p.done / plainEvery
		fmt.Fprintf(p.w, "%s: %s\n", p.label, p.amount())
	}
}

// plainEvery is how many items make a plain progress line when the total is
// not known.
const plainEvery = 1000

// finish ends the display: the bar is completed and its line ended; plain
// output gets a last line if it did not reach 100%.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	if p.tty {
		p.drawBar()
		fmt.Fprintln(p.w)
		return
	}
	if p.total == 0 || p.tenth < 10 {
		fmt.Fprintf(p.w, "%s: done (%s)\n", p.label, p.amount())
		p.tenth = 10
	}
}

// clear removes the bar (before printing something else on stderr).
func (p *progress) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != nil && p.tty && p.lastLen > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.lastLen))
		p.lastLen = 0
	}
}

const barWidth = 30

func (p *progress) drawBar() {
	p.drawn = time.Now()
	frac := 0.0
	if p.total > 0 {
		frac = min(1, float64(p.done)/float64(p.total))
	}
	fill := int(frac * barWidth)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill)
	if fill > 0 && fill < barWidth {
		bar = bar[:fill-1] + ">" + bar[fill:]
	}
	line := fmt.Sprintf("%s [%s] %3.0f%% %s", p.label, bar, frac*100, p.amount())
	if p.bytes {
		line += "  " + fmtRate(p.done, time.Since(p.start))
	}
	pad := max(0, p.lastLen-len(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.lastLen = len(line)
}

func (p *progress) amount() string {
	if p.bytes {
		if p.total > 0 {
			return fmtBytes(p.done) + " of " + fmtBytes(p.total)
		}
		return fmtBytes(p.done)
	}
	if p.total > 0 {
		return fmt.Sprintf("%d of %d", p.done, p.total)
	}
	return strings.TrimSpace(fmt.Sprint(p.done, " ", p.unit))
}
