package restore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
)

// Fetching runs ahead of the replay: up to Parallelism batches are
// downloaded and decoded (gunzip and Cap'n Proto, the expensive part) by
// their own goroutines while the replay applies frames strictly in order.
//
// Memory is bounded by a byte budget (Options.MaxInflightBytes) shared by
// every object ahead of the replay: a batch is downloaded whole into
// memory only when its compressed size fits the budget, and every decoded
// frame message waiting to be applied holds its size. The object the
// replay is reading (the head) must never wait for objects behind it, or
// the two would wait for each other; so the head is never refused its
// first frame, and may hold up to a budget of its own frames beside what
// the others hold. A head whose download did not fit the budget streams
// straight from the bucket. Memory stays within about twice the budget
// plus one frame message (Limits.MaxMessageSize), whatever the objects
// claim.
//
// Objects ahead are downloaded whole rather than read as the replay needs
// them so that no connection sits idle mid-body while the replay works on
// something else (servers reset connections that stall), and so that a
// slow object never holds a download slot.

// itemQueue bounds the frames a stream hands over before the replay takes
// them. The budget bounds the bytes; this only keeps a stream of tiny
// frames from running far ahead.
const itemQueue = 16

// item is one step of a stream: the header, a frame message, the verified
// end, or the error that ended it.
type item struct {
	hdr   *frames.BatchHeader
	frame *frames.Frame
	size  int64 // budget held by frame
	eof   bool
	err   error
}

// stream is one batch being fetched.
type stream struct {
	idx    int
	key    string
	size   int64 // listed size
	items  chan item
	ctx    context.Context
	cancel context.CancelFunc
	held   int64 // frame bytes handed over and not released; guarded by budget.mu
}

// fetcher fetches a plan's batches ahead of the replay.
type fetcher struct {
	ctx     context.Context
	cancel  context.CancelFunc
	b       bucket.Bucket
	lim     frames.Limits
	budget  budget
	streams []*stream
	skipped []atomic.Bool
	slots   chan struct{}
	wg      sync.WaitGroup

	objects atomic.Int64 // objects fetched (GETs that returned a body)
	bytes   atomic.Int64 // compressed bytes read from the bucket
}

func newFetcher(ctx context.Context, b bucket.Bucket, objs []Object, opts Options) *fetcher {
	ctx, cancel := context.WithCancel(ctx)
	f := &fetcher{
		ctx: ctx, cancel: cancel, b: b, lim: opts.Limits,
		budget:  budget{max: opts.MaxInflightBytes, head: -1, changed: make(chan struct{})},
		streams: make([]*stream, len(objs)),
		skipped: make([]atomic.Bool, len(objs)),
		slots:   make(chan struct{}, opts.Parallelism),
	}
	for i, o := range objs {
		sctx, scancel := context.WithCancel(ctx)
		f.streams[i] = &stream{idx: i, key: o.Key, size: o.Size, items: make(chan item, itemQueue), ctx: sctx, cancel: scancel}
	}
	f.wg.Add(1)
	go f.dispatch()
	return f
}

// dispatch starts the streams in plan order, Parallelism at a time.
func (f *fetcher) dispatch() {
	defer f.wg.Done()
	for i, s := range f.streams {
		select {
		case f.slots <- struct{}{}:
		case <-f.ctx.Done():
			return
		}
		if f.skipped[i].Load() {
			<-f.slots
			close(s.items)
			continue
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() { <-f.slots }()
			defer close(s.items)
			f.run(s)
		}()
	}
}

// open makes stream i the head and returns it. The replay opens streams
// in increasing order.
func (f *fetcher) open(i int) *stream {
	f.budget.setHead(i)
	return f.streams[i]
}

// skip tells the fetcher that stream i will not be read: it stops, and
// what it handed over already gives its budget back.
func (f *fetcher) skip(i int) {
	s := f.streams[i]
	f.skipped[i].Store(true)
	s.cancel()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			select {
			case it, ok := <-s.items:
				if !ok {
					return
				}
				f.budget.release(s, it.size)
			case <-f.ctx.Done():
				return // the fetcher is closing: the budget no longer matters
			}
		}
	}()
}

// release returns the budget a frame held once it is applied.
func (f *fetcher) release(s *stream, it item) { f.budget.release(s, it.size) }

// close stops every stream and waits for them.
func (f *fetcher) close() {
	f.cancel()
	f.wg.Wait()
}

// next returns the next item of a stream the replay reads.
func (s *stream) next(ctx context.Context) item {
	select {
	case it, ok := <-s.items:
		if !ok {
			// A stream closes its queue only after its last item, which the
			// replay stops at; reaching this means it was cancelled.
			if err := s.ctx.Err(); err != nil {
				return item{err: err}
			}
			return item{err: errors.New("stream ended without a result")}
		}
		return it
	case <-ctx.Done():
		return item{err: ctx.Err()}
	}
}

// send hands an item to the replay, unless the stream is cancelled.
func (s *stream) send(it item) bool {
	select {
	case s.items <- it:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// run downloads and decodes one batch.
func (f *fetcher) run(s *stream) {
	ctx := s.ctx
	asHead, err := f.budget.reserve(ctx, s, s.size)
	if err != nil {
		return // cancelled
	}
	var src io.Reader
	if asHead {
		rc, _, err := f.b.Get(ctx, s.key)
		if err != nil {
			s.send(item{err: err})
			return
		}
		defer rc.Close()
		f.objects.Add(1)
		src = iocount.NewReader(rc, &f.bytes)
	} else {
		defer f.budget.release(nil, s.size)
		// Objects are immutable: the listed size is the size, and an
		// object larger than listed is refused rather than let past the
		// budget, as damage (frames.ErrDamage): the bucket does not hold
		// the object it listed.
		data, _, err := bucket.ReadAll(ctx, f.b, s.key, s.size)
		if errors.Is(err, bucket.ErrTooLarge) {
			err = frames.Damaged(err)
		}
		if err != nil {
			s.send(item{err: err})
			return
		}
		f.objects.Add(1)
		f.bytes.Add(int64(len(data)))
		src = bytes.NewReader(data)
	}
	br, err := frames.NewBatchReader(src, s.key, f.lim)
	if err != nil {
		s.send(item{err: err})
		return
	}
	hdr := br.Header()
	if !s.send(item{hdr: &hdr}) {
		return
	}
	for {
		fr, err := br.Next()
		if err == io.EOF {
			s.send(item{eof: true})
			return
		}
		if err != nil {
			s.send(item{err: err})
			return
		}
		n := frameBytes(fr)
		if err := f.budget.take(ctx, s, n); err != nil {
			return
		}
		if !s.send(item{frame: fr, size: n}) {
			return
		}
	}
}

// frameBytes is what a decoded frame message holds in memory.
func frameBytes(f *frames.Frame) int64 {
	n := int64(256)
	if f.Kind == frames.KindSQLitePages {
		n += int64(len(f.SQLite.Pages)) * (int64(f.SQLite.PageSize) + 32)
	}
	return n
}

// budget bounds the bytes held ahead of the replay (see the top of this
// file).
type budget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	head    int
	changed chan struct{} // closed and replaced on every release and head change
}

// reserve waits until size bytes of download fit the budget and takes
// them, or until s becomes the head, which then streams without them
// (asHead true, nothing taken).
func (b *budget) reserve(ctx context.Context, s *stream, size int64) (asHead bool, err error) {
	for {
		b.mu.Lock()
		switch {
		case s.idx == b.head:
			b.mu.Unlock()
			return true, nil
		case b.used+size <= b.max:
			b.used += size
			b.mu.Unlock()
			return false, nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// take waits until a frame of n bytes may be handed over by s, and takes
// them.
func (b *budget) take(ctx context.Context, s *stream, n int64) error {
	for {
		b.mu.Lock()
		var ok bool
		if s.idx == b.head {
			ok = s.held == 0 || s.held+n <= b.max
		} else {
			ok = b.used == 0 || b.used+n <= b.max
		}
		if ok {
			b.used += n
			s.held += n
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives back n bytes (a frame of s, or a download when s is nil).
func (b *budget) release(s *stream, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if s != nil {
		s.held -= n
	}
	b.notifyLocked()
	b.mu.Unlock()
}

func (b *budget) setHead(i int) {
	b.mu.Lock()
	b.head = i
	b.notifyLocked()
	b.mu.Unlock()
}

func (b *budget) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}
