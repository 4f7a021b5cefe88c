package frames

import (
	"errors"
	"fmt"
	"io"

	capnp "capnproto.org/go/capnp/v3"
	"github.com/klauspost/compress/flate"

	wire "github.com/framectl/framectl/capnp"
)

// BatchHeader describes a batch file: its first message. The file's layout
// and the rules its reader enforces are under "Batch files" in the package
// documentation (doc.go).
type BatchHeader struct {
	Epoch      Epoch
	FirstSeq   Seq
	LastSeq    Seq
	FrameCount uint32 // frame messages, parts counted one by one
}

// WriteOptions tune encoding. The zero value means the defaults.
type WriteOptions struct {
	// Level is the DEFLATE level (flate.BestSpeed .. flate.BestCompression).
	// Default DefaultLevel.
	Level int
	// MaxPartBytes bounds the page bytes in one frame message; a larger
	// frame is split into parts. Default DefaultMaxPartBytes.
	MaxPartBytes int
}

const (
	// DefaultLevel is the DEFLATE level used when WriteOptions.Level is 0.
	DefaultLevel = flate.BestSpeed
	// DefaultMaxPartBytes keeps every frame message a quarter of
	// DefaultMaxMessageSize, so readers with default limits accept it.
	DefaultMaxPartBytes = 4 << 20
)

func (o WriteOptions) withDefaults() WriteOptions {
	if o.Level == 0 {
		o.Level = DefaultLevel
	}
	if o.MaxPartBytes <= 0 {
		o.MaxPartBytes = DefaultMaxPartBytes
	}
	return o
}

// WriteBatch encodes frames as a batch file of epoch into w and returns its
// header. Frames must be whole (Continued false), valid, of that epoch, and
// contiguous; the batch key is Actor.LogKey(epoch, header.LastSeq).
func WriteBatch(w io.Writer, epoch Epoch, frames []Frame, opts WriteOptions) (BatchHeader, error) {
	opts = opts.withDefaults()
	fail := func(err error) (BatchHeader, error) {
		return BatchHeader{}, &Error{Object: "batch", Err: err}
	}
	if len(frames) == 0 {
		return fail(invalid("a batch needs at least one frame"))
	}
	var parts uint64
	for i := range frames {
		f := &frames[i]
		if f.Epoch != epoch {
			return fail(invalid(fmt.Sprintf("frame %d..%d has epoch %d, batch has %d", f.FirstSeq, f.LastSeq, f.Epoch, epoch)))
		}
		if f.Kind == KindSQLitePages && f.SQLite.Continued {
			return fail(invalid("frames given to WriteBatch must be whole (Continued false)"))
		}
		if err := f.validate(0); err != nil {
			return fail(asInvalid(err))
		}
		if i > 0 {
			if err := follows(&frames[i-1], f); err != nil {
				return fail(asInvalid(err))
			}
		}
		parts += uint64(len(splitPages(f, opts.MaxPartBytes)))
	}
	if parts > 1<<32-1 {
		return fail(invalid("too many frame messages for one batch"))
	}
	hdr := BatchHeader{Epoch: epoch, FirstSeq: frames[0].FirstSeq, LastSeq: frames[len(frames)-1].LastSeq, FrameCount: uint32(parts)}

	gz, err := newGzipWriter(w, opts.Level)
	if err != nil {
		return fail(err)
	}
	if err := writeBatchHeader(gz, hdr); err != nil {
		return fail(err)
	}
	for i := range frames {
		chunks := splitPages(&frames[i], opts.MaxPartBytes)
		for j, pages := range chunks {
			if err := writeFrame(gz, &frames[i], pages, j < len(chunks)-1); err != nil {
				return fail(err)
			}
		}
	}
	if gz.size > DefaultMaxBatchBytes {
		return fail(tooLarge(fmt.Sprintf("batch of %d bytes exceeds what readers accept by default (%d)", gz.size, uint64(DefaultMaxBatchBytes))))
	}
	if err := gz.Close(); err != nil {
		return fail(err)
	}
	return hdr, nil
}

// asInvalid turns a validation failure into ErrInvalid: on the writing side
// it is the caller's mistake, not damage.
func asInvalid(err error) error {
	var p *problem
	if errors.As(err, &p) {
		return invalid(p.msg)
	}
	return err
}

// splitPages cuts a frame's pages into message-sized parts; a frame without
// pages is one part.
func splitPages(f *Frame, maxPartBytes int) [][]Page {
	if f.Kind != KindSQLitePages || len(f.SQLite.Pages) == 0 {
		return [][]Page{nil}
	}
	per := max(1, maxPartBytes/int(f.SQLite.PageSize))
	pages := f.SQLite.Pages
	out := make([][]Page, 0, (len(pages)+per-1)/per)
	for len(pages) > per {
		out = append(out, pages[:per])
		pages = pages[per:]
	}
	return append(out, pages)
}

func writeBatchHeader(w io.Writer, h BatchHeader) error {
	msg, seg, err := newMessage(64)
	if err != nil {
		return err
	}
	bh, err := wire.NewRootBatchHeader(seg)
	if err != nil {
		return err
	}
	bh.SetVersion(wire.FormatVersion)
	bh.SetEpoch(uint64(h.Epoch))
	bh.SetFirstSeq(uint64(h.FirstSeq))
	bh.SetLastSeq(uint64(h.LastSeq))
	bh.SetFrameCount(h.FrameCount)
	return writeMessage(w, msg)
}

// writeFrame writes one frame message carrying pages (all of f's pages, or
// one part of them).
func writeFrame(w io.Writer, f *Frame, pages []Page, continued bool) error {
	size := 128
	if f.Kind == KindSQLitePages {
		size += len(pages) * (int(f.SQLite.PageSize) + 24)
	}
	msg, seg, err := newMessage(size)
	if err != nil {
		return err
	}
	fr, err := wire.NewRootFrame(seg)
	if err != nil {
		return err
	}
	fr.SetEpoch(uint64(f.Epoch))
	fr.SetFirstSeq(uint64(f.FirstSeq))
	fr.SetLastSeq(uint64(f.LastSeq))
	fr.SetLane(f.Lane)
	fr.SetCommitTime(f.CommitTime)
	switch f.Kind {
	case KindSQLitePages:
		sp, err := fr.NewSqlitePages()
		if err != nil {
			return err
		}
		sp.SetPageSize(f.SQLite.PageSize)
		sp.SetDatabasePages(f.SQLite.DatabasePages)
		sp.SetChecksumBefore(uint64(f.SQLite.Before))
		sp.SetChecksumAfter(uint64(f.SQLite.After))
		sp.SetContinued(continued)
		pl, err := sp.NewPages(int32(len(pages)))
		if err != nil {
			return err
		}
		for i := range pages {
			p := pl.At(i)
			p.SetNumber(pages[i].Number)
			if err := p.SetData(pages[i].Data); err != nil {
				return err
			}
		}
	case KindNewLane:
		fr.SetNewLane(wire.LaneKind(f.NewLane))
	case KindInitialize:
		fr.SetInitialize()
	case KindDeleteLane:
		fr.SetDeleteLane()
	default:
		return invalid(fmt.Sprintf("unknown frame kind %d", f.Kind))
	}
	return writeMessage(w, msg)
}

// BatchReader streams the frames of a batch file. Frames it returns are
// tentative until Next reports io.EOF: only then have the gzip trailer, the
// frame count and the sequence range been verified.
type BatchReader struct {
	key  string
	hdr  BatchHeader
	m    *msgReader
	read uint32 // frame messages returned
	prev *Frame
	err  error // sticky
}

// NewBatchReader reads and checks the header of a batch file. key names the
// object in errors; when it parses as a log key, the header must agree with
// it.
func NewBatchReader(r io.Reader, key string, lim Limits) (*BatchReader, error) {
	lim = lim.withDefaults()
	b := &BatchReader{key: key}
	g, err := newGzipReader(r, lim.MaxBatchBytes)
	if err != nil {
		return nil, b.wrap(err)
	}
	b.m = newMsgReader(g, lim)
	msg, _, err := b.m.next()
	if err == io.EOF {
		return nil, b.wrap(corrupt("no batch header"))
	}
	if err != nil {
		return nil, b.wrap(err)
	}
	if b.hdr, err = decodeBatchHeader(msg); err != nil {
		return nil, b.wrap(err)
	}
	if err := b.checkKey(); err != nil {
		return nil, b.wrap(err)
	}
	return b, nil
}

func (b *BatchReader) wrap(err error) error {
	if _, ok := err.(*Error); ok {
		return err
	}
	return &Error{Object: "batch", Key: b.key, Err: err}
}

func (b *BatchReader) checkKey() error {
	k, err := ParseKey(b.key)
	if err != nil {
		return nil // not a bucket key (a local file name): nothing to compare
	}
	if k.Kind != KeyLog {
		return invalid("key names a " + k.Kind.String() + " object, not a batch")
	}
	if k.Epoch != b.hdr.Epoch || k.Seq != b.hdr.LastSeq {
		return &KeyMismatchError{Key: k, Epoch: b.hdr.Epoch, FirstSeq: b.hdr.FirstSeq, LastSeq: b.hdr.LastSeq}
	}
	return nil
}

// Header returns the batch header.
func (b *BatchReader) Header() BatchHeader { return b.hdr }

// Next returns the next frame message (a whole frame, or one part of a
// continued frame). Page data stays valid after later calls. At the end of a
// batch that verified completely it returns io.EOF.
func (b *BatchReader) Next() (*Frame, error) {
	if b.err != nil {
		return nil, b.err
	}
	f, err := b.next()
	if err != nil {
		if err != io.EOF {
			err = b.wrap(err)
		}
		b.err = err
	}
	return f, err
}

func (b *BatchReader) next() (*Frame, error) {
	msg, size, err := b.m.next()
	if b.read == b.hdr.FrameCount {
		switch {
		case err == io.EOF:
			if b.prev.Kind == KindSQLitePages && b.prev.SQLite.Continued {
				return nil, corrupt("last frame is marked continued")
			}
			if b.prev.LastSeq != b.hdr.LastSeq {
				return nil, corrupt(fmt.Sprintf("frames end at %d, header says %d", b.prev.LastSeq, b.hdr.LastSeq))
			}
			return nil, io.EOF
		case err == nil:
			return nil, corrupt(fmt.Sprintf("more frames than the header's %d", b.hdr.FrameCount))
		default:
			return nil, err
		}
	}
	if err == io.EOF {
		return nil, corrupt(fmt.Sprintf("%d frames, header says %d", b.read, b.hdr.FrameCount))
	}
	if err != nil {
		return nil, err
	}
	f, err := decodeFrame(msg, size)
	if err != nil {
		return nil, err
	}
	if f.Epoch != b.hdr.Epoch {
		return nil, corrupt(fmt.Sprintf("frame %d..%d has epoch %d, header says %d", f.FirstSeq, f.LastSeq, f.Epoch, b.hdr.Epoch))
	}
	after := uint32(0)
	if b.prev == nil {
		if f.FirstSeq != b.hdr.FirstSeq {
			return nil, corrupt(fmt.Sprintf("first frame starts at %d, header says %d", f.FirstSeq, b.hdr.FirstSeq))
		}
	} else {
		if err := follows(b.prev, f); err != nil {
			return nil, err
		}
		if b.prev.Kind == KindSQLitePages && b.prev.SQLite.Continued && len(b.prev.SQLite.Pages) > 0 {
			after = b.prev.SQLite.Pages[len(b.prev.SQLite.Pages)-1].Number
		}
	}
	if err := f.validate(after); err != nil {
		return nil, err
	}
	if f.LastSeq > b.hdr.LastSeq {
		return nil, corrupt(fmt.Sprintf("frame %d..%d runs past the header's last seq %d", f.FirstSeq, f.LastSeq, b.hdr.LastSeq))
	}
	b.read++
	b.prev = f
	return f, nil
}

// ReadBatch reads a whole batch into memory, joining the parts of continued
// frames, and returns it only if it verified completely. Memory grows with
// the batch; use BatchReader to stream.
func ReadBatch(r io.Reader, key string, lim Limits) (BatchHeader, []Frame, error) {
	br, err := NewBatchReader(r, key, lim)
	if err != nil {
		return BatchHeader{}, nil, err
	}
	var frames []Frame
	joining := false
	for {
		f, err := br.Next()
		if err == io.EOF {
			return br.Header(), frames, nil
		}
		if err != nil {
			return BatchHeader{}, nil, err
		}
		if joining {
			last := &frames[len(frames)-1]
			last.SQLite.Pages = append(last.SQLite.Pages, f.SQLite.Pages...)
			last.SQLite.Continued = f.SQLite.Continued
		} else {
			frames = append(frames, *f)
		}
		joining = f.Kind == KindSQLitePages && f.SQLite.Continued
	}
}

func decodeBatchHeader(msg *capnp.Message) (BatchHeader, error) {
	bh, err := wire.ReadRootBatchHeader(msg)
	if err != nil {
		return BatchHeader{}, corruptCause("batch header", err)
	}
	if v := bh.Version(); v != wire.FormatVersion {
		return BatchHeader{}, unknownKind(fmt.Sprintf("format version %d (this build reads %d)", v, wire.FormatVersion))
	}
	h := BatchHeader{Epoch: Epoch(bh.Epoch()), FirstSeq: Seq(bh.FirstSeq()), LastSeq: Seq(bh.LastSeq()), FrameCount: bh.FrameCount()}
	switch {
	case h.FrameCount == 0:
		return BatchHeader{}, corrupt("header counts no frames")
	case h.FirstSeq == 0 || h.LastSeq < h.FirstSeq:
		return BatchHeader{}, corrupt(fmt.Sprintf("header range %d..%d is invalid", h.FirstSeq, h.LastSeq))
	}
	return h, nil
}

// decodeFrame converts a frame message, reading every field once.
func decodeFrame(msg *capnp.Message, size uint64) (*Frame, error) {
	fr, err := wire.ReadRootFrame(msg)
	if err != nil {
		return nil, corruptCause("frame", err)
	}
	f := &Frame{Epoch: Epoch(fr.Epoch()), FirstSeq: Seq(fr.FirstSeq()), LastSeq: Seq(fr.LastSeq()), Lane: fr.Lane(), CommitTime: fr.CommitTime()}
	switch fr.Which() {
	case wire.Frame_Which_sqlitePages:
		f.Kind = KindSQLitePages
		sp, err := fr.SqlitePages()
		if err != nil {
			return nil, corruptCause("frame pages", err)
		}
		p := &f.SQLite
		p.PageSize, p.DatabasePages = sp.PageSize(), sp.DatabasePages()
		p.Before, p.After = Checksum(sp.ChecksumBefore()), Checksum(sp.ChecksumAfter())
		p.Continued = sp.Continued()
		if !ValidPageSize(p.PageSize) {
			return nil, corrupt(fmt.Sprintf("frame %d..%d: page size %d is not a power of two in 512..65536", f.FirstSeq, f.LastSeq, p.PageSize))
		}
		pl, err := sp.Pages()
		if err != nil {
			return nil, corruptCause("frame page list", err)
		}
		// Every page carries PageSize bytes, so a list longer than the
		// message can hold is a lie; refuse it before allocating for it.
		if uint64(pl.Len())*uint64(p.PageSize) > size {
			return nil, corrupt(fmt.Sprintf("frame %d..%d: %d pages cannot fit a %d-byte message", f.FirstSeq, f.LastSeq, pl.Len(), size))
		}
		p.Pages = make([]Page, pl.Len())
		for i := range p.Pages {
			pg := pl.At(i)
			d, err := pg.Data()
			if err != nil {
				return nil, corruptCause("frame page data", err)
			}
			p.Pages[i] = Page{Number: pg.Number(), Data: d}
		}
	case wire.Frame_Which_newLane:
		f.Kind = KindNewLane
		f.NewLane = LaneKind(fr.NewLane())
		if f.NewLane != LaneSQLitePages {
			return nil, unknownKind(fmt.Sprintf("frame %d..%d: new lane of unknown kind %d", f.FirstSeq, f.LastSeq, f.NewLane))
		}
	case wire.Frame_Which_initialize:
		f.Kind = KindInitialize
	case wire.Frame_Which_deleteLane:
		f.Kind = KindDeleteLane
	default:
		return nil, unknownKind(fmt.Sprintf("frame %d..%d: unknown frame kind (union tag %d)", f.FirstSeq, f.LastSeq, uint16(fr.Which())))
	}
	return f, nil
}
