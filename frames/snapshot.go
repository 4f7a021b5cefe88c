package frames

import (
	"fmt"
	"io"

	capnp "capnproto.org/go/capnp/v3"

	wire "github.com/framectl/framectl/capnp"
)

// Snapshot is a snapshot file's header. The file's layout and the rules its
// reader enforces are under "Snapshot files" in the package documentation
// (doc.go).
type Snapshot struct {
	Epoch      Epoch
	Seq        Seq   // state after every commit through Seq; 0 = before the first
	CommitTime int64 // Unix nanoseconds of commit Seq; 0 when Seq is 0
	Lanes      []SnapshotLane
}

// SnapshotLane describes one lane's bytes in a snapshot.
type SnapshotLane struct {
	Lane     uint32
	Kind     LaneKind
	PageSize uint32
	Bytes    uint64 // exactly this many bytes follow: Pages() * PageSize
	Checksum Checksum
}

// Pages returns the lane's size in pages.
func (l SnapshotLane) Pages() uint64 { return l.Bytes / uint64(l.PageSize) }

// validate checks the header on its own.
func (s *Snapshot) validate(maxLanes int, maxBytes uint64) error {
	if len(s.Lanes) > maxLanes {
		return tooLarge(fmt.Sprintf("%d lanes, limit %d", len(s.Lanes), maxLanes))
	}
	var total uint64
	for i, l := range s.Lanes {
		if i > 0 && l.Lane <= s.Lanes[i-1].Lane {
			return corrupt(fmt.Sprintf("lanes not strictly ascending (%d after %d)", l.Lane, s.Lanes[i-1].Lane))
		}
		if l.Kind != LaneSQLitePages {
			return unknownKind(fmt.Sprintf("lane %d has unknown kind %d", l.Lane, l.Kind))
		}
		if !ValidPageSize(l.PageSize) {
			return corrupt(fmt.Sprintf("lane %d: page size %d is not a power of two in 512..65536", l.Lane, l.PageSize))
		}
		if l.Bytes%uint64(l.PageSize) != 0 {
			return corrupt(fmt.Sprintf("lane %d: %d bytes is not a whole number of %d-byte pages", l.Lane, l.Bytes, l.PageSize))
		}
		if l.Pages() > MaxDatabasePages {
			return corrupt(fmt.Sprintf("lane %d: %d pages exceeds SQLite's maximum", l.Lane, l.Pages()))
		}
		total += l.Bytes
		if total > maxBytes {
			return tooLarge(fmt.Sprintf("lanes hold more than the %d-byte limit", maxBytes))
		}
	}
	return nil
}

// laneHasher computes a lane's rolling checksum from bytes arriving in
// arbitrary pieces, page by page.
type laneHasher struct {
	pageSize int
	page     []byte // partial page
	fill     int
	pgno     uint32
	sum      Checksum
}

func newLaneHasher(pageSize uint32) *laneHasher {
	return &laneHasher{pageSize: int(pageSize), page: make([]byte, pageSize)}
}

func (h *laneHasher) write(p []byte) {
	for len(p) > 0 {
		if h.fill == 0 && len(p) >= h.pageSize {
			h.pgno++
			h.sum = h.sum.Add(h.pgno, p[:h.pageSize])
			p = p[h.pageSize:]
			continue
		}
		n := copy(h.page[h.fill:], p)
		h.fill += n
		p = p[n:]
		if h.fill == h.pageSize {
			h.pgno++
			h.sum = h.sum.Add(h.pgno, h.page)
			h.fill = 0
		}
	}
}

// SnapshotWriter streams a snapshot file: the header first (it carries the
// lengths and checksums, so the caller knows them before it starts), then
// each lane's bytes through Write, in order. Close verifies that every lane
// got exactly its bytes with its checksum before it writes the gzip trailer:
// an object whose Close failed must be discarded (the trailer is missing, so
// no reader accepts it).
type SnapshotWriter struct {
	gz     *gzipWriter
	hdr    Snapshot
	lane   int    // index of the lane being written
	left   uint64 // bytes still due for it
	hasher *laneHasher
	err    error
}

// NewSnapshotWriter writes the header of a snapshot into w.
func NewSnapshotWriter(w io.Writer, hdr Snapshot, opts WriteOptions) (*SnapshotWriter, error) {
	opts = opts.withDefaults()
	hdr.Lanes = append([]SnapshotLane(nil), hdr.Lanes...)
	sw := &SnapshotWriter{hdr: hdr, lane: -1}
	if err := hdr.validate(DefaultMaxLanes, DefaultMaxSnapshotBytes); err != nil {
		return nil, sw.wrap(asInvalid(err))
	}
	gz, err := newGzipWriter(w, opts.Level)
	if err != nil {
		return nil, sw.wrap(err)
	}
	sw.gz = gz
	if err := writeSnapshotHeader(gz, &hdr); err != nil {
		return nil, sw.wrap(err)
	}
	sw.advance()
	return sw, nil
}

func (sw *SnapshotWriter) wrap(err error) error {
	if _, ok := err.(*Error); ok {
		return err
	}
	return &Error{Object: "snapshot", Err: err}
}

// advance finishes the current lane (checking its checksum) and moves to the
// next one that has bytes.
func (sw *SnapshotWriter) advance() {
	for sw.left == 0 {
		if sw.lane >= 0 {
			l := sw.hdr.Lanes[sw.lane]
			if sw.hasher.sum != l.Checksum {
				sw.err = sw.wrap(invalid(fmt.Sprintf("lane %d: bytes written have checksum %s, header declares %s",
					l.Lane, sw.hasher.sum, l.Checksum)))
				return
			}
		}
		sw.lane++
		if sw.lane == len(sw.hdr.Lanes) {
			return
		}
		sw.left = sw.hdr.Lanes[sw.lane].Bytes
		sw.hasher = newLaneHasher(sw.hdr.Lanes[sw.lane].PageSize)
	}
}

// Write appends lane bytes. Writing past the last lane's end is an error.
func (sw *SnapshotWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if sw.err != nil {
			return written, sw.err
		}
		if sw.lane == len(sw.hdr.Lanes) {
			sw.err = sw.wrap(invalid("more bytes than the header's lanes declare"))
			return written, sw.err
		}
		n := int(min(uint64(len(p)), sw.left))
		if _, err := sw.gz.Write(p[:n]); err != nil {
			sw.err = sw.wrap(err)
			return written, sw.err
		}
		sw.hasher.write(p[:n])
		sw.left -= uint64(n)
		written += n
		p = p[n:]
		if sw.left == 0 {
			sw.advance()
		}
	}
	return written, sw.err
}

// Close checks that every lane is complete and writes the gzip trailer. It
// does not close the underlying writer.
func (sw *SnapshotWriter) Close() error {
	if sw.err != nil {
		return sw.err
	}
	if sw.lane < len(sw.hdr.Lanes) {
		l := sw.hdr.Lanes[sw.lane]
		sw.err = sw.wrap(invalid(fmt.Sprintf("lane %d: %d of %d bytes written", l.Lane, l.Bytes-sw.left, l.Bytes)))
		return sw.err
	}
	if err := sw.gz.Close(); err != nil {
		sw.err = sw.wrap(err)
		return sw.err
	}
	sw.err = sw.wrap(invalid("snapshot writer already closed"))
	return nil
}

func writeSnapshotHeader(w io.Writer, s *Snapshot) error {
	msg, seg, err := newMessage(128 + 48*len(s.Lanes))
	if err != nil {
		return err
	}
	sh, err := wire.NewRootSnapshotHeader(seg)
	if err != nil {
		return err
	}
	sh.SetVersion(wire.FormatVersion)
	sh.SetEpoch(uint64(s.Epoch))
	sh.SetSeq(uint64(s.Seq))
	sh.SetCommitTime(s.CommitTime)
	ll, err := sh.NewLanes(int32(len(s.Lanes)))
	if err != nil {
		return err
	}
	for i, l := range s.Lanes {
		e := ll.At(i)
		e.SetLane(l.Lane)
		e.SetKind(wire.LaneKind(l.Kind))
		e.SetPageSize(l.PageSize)
		e.SetByteLength(l.Bytes)
		e.SetChecksum(uint64(l.Checksum))
	}
	return writeMessage(w, msg)
}

// SnapshotReader streams a snapshot file. Lane bytes are tentative until
// NextLane reports io.EOF: the checksum of a lane is checked when its last
// byte is read, the gzip trailer at the very end.
type SnapshotReader struct {
	key    string
	hdr    Snapshot
	g      *gzipReader
	lane   int // index of the current lane, -1 before the first
	left   uint64
	hasher *laneHasher
	err    error // sticky
}

// NewSnapshotReader reads and checks the header of a snapshot file. key
// names the object in errors; when it parses as a snapshot key, the header
// must agree with it. A manifest (format version 2) is refused with
// ErrUnknownKind: OpenSnapshot reads either.
func NewSnapshotReader(r io.Reader, key string, lim Limits) (*SnapshotReader, error) {
	lim = lim.withDefaults()
	sr := &SnapshotReader{key: key, lane: -1}
	g, err := newGzipReader(r, lim.MaxSnapshotBytes)
	if err != nil {
		return nil, sr.wrap(err)
	}
	sr.g = g
	msg, size, err := newMsgReader(g, lim).next()
	if err == io.EOF {
		return nil, sr.wrap(corrupt("no snapshot header"))
	}
	if err != nil {
		return nil, sr.wrap(err)
	}
	if err := sr.start(msg, size, lim); err != nil {
		return nil, err
	}
	return sr, nil
}

// start decodes and checks the header message, of size bytes, and the key.
// Its errors are wrapped.
func (sr *SnapshotReader) start(msg *capnp.Message, size uint64, lim Limits) error {
	sh, err := wire.ReadRootSnapshotHeader(msg)
	if err != nil {
		return sr.wrap(corruptCause("snapshot header", err))
	}
	switch v := sh.Version(); v {
	case wire.FormatVersion:
	case wire.ManifestFormatVersion:
		return sr.wrap(unknownKind(fmt.Sprintf("a manifest (format version %d), not a full snapshot (format version %d)", v, wire.FormatVersion)))
	default:
		return sr.wrap(unknownKind(fmt.Sprintf("format version %d (this build reads %d)", v, wire.FormatVersion)))
	}
	sr.hdr = Snapshot{Epoch: Epoch(sh.Epoch()), Seq: Seq(sh.Seq()), CommitTime: sh.CommitTime()}
	ll, err := sh.Lanes()
	if err != nil {
		return sr.wrap(corruptCause("snapshot lanes", err))
	}
	// A lane entry takes at least 8 bytes of message; refuse a list the
	// message cannot hold before allocating for it.
	if ll.Len() > lim.MaxLanes || uint64(ll.Len())*8 > size {
		return sr.wrap(tooLarge(fmt.Sprintf("%d lanes in a %d-byte header (limit %d lanes)", ll.Len(), size, lim.MaxLanes)))
	}
	sr.hdr.Lanes = make([]SnapshotLane, ll.Len())
	for i := range sr.hdr.Lanes {
		e := ll.At(i)
		sr.hdr.Lanes[i] = SnapshotLane{Lane: e.Lane(), Kind: LaneKind(e.Kind()), PageSize: e.PageSize(),
			Bytes: e.ByteLength(), Checksum: Checksum(e.Checksum())}
	}
	if err := sr.hdr.validate(lim.MaxLanes, lim.MaxSnapshotBytes-min(size, lim.MaxSnapshotBytes)); err != nil {
		return sr.wrap(err)
	}
	if err := sr.checkKey(); err != nil {
		return sr.wrap(err)
	}
	return nil
}

func (sr *SnapshotReader) wrap(err error) error {
	if _, ok := err.(*Error); ok {
		return err
	}
	return &Error{Object: "snapshot", Key: sr.key, Err: err}
}

func (sr *SnapshotReader) checkKey() error {
	k, err := ParseKey(sr.key)
	if err != nil {
		return nil // not a bucket key (a local file name): nothing to compare
	}
	if k.Kind != KeySnapshot {
		return invalid("key names a " + k.Kind.String() + " object, not a snapshot")
	}
	if k.Epoch != sr.hdr.Epoch || k.Seq != sr.hdr.Seq {
		return &KeyMismatchError{Key: k, Epoch: sr.hdr.Epoch, FirstSeq: sr.hdr.Seq, LastSeq: sr.hdr.Seq}
	}
	return nil
}

// Header returns the snapshot header.
func (sr *SnapshotReader) Header() Snapshot { return sr.hdr }

// NextLane skips what is left of the current lane (verifying it) and returns
// the next lane with a reader of exactly its bytes. After the last lane it
// verifies the end of the object and returns io.EOF.
func (sr *SnapshotReader) NextLane() (SnapshotLane, io.Reader, error) {
	if sr.err != nil {
		return SnapshotLane{}, nil, sr.err
	}
	if sr.lane >= 0 && sr.left > 0 {
		if _, err := io.Copy(io.Discard, laneReader{sr}); err != nil {
			return SnapshotLane{}, nil, err
		}
	}
	sr.lane++
	if sr.lane == len(sr.hdr.Lanes) {
		if err := sr.g.verifyEnd(); err != nil {
			sr.err = sr.wrap(err)
			return SnapshotLane{}, nil, sr.err
		}
		sr.err = io.EOF
		return SnapshotLane{}, nil, io.EOF
	}
	l := sr.hdr.Lanes[sr.lane]
	sr.left = l.Bytes
	sr.hasher = newLaneHasher(l.PageSize)
	if sr.left == 0 && l.Checksum != 0 {
		sr.err = sr.wrap(corrupt(fmt.Sprintf("lane %d is empty but declares checksum %s", l.Lane, l.Checksum)))
		return SnapshotLane{}, nil, sr.err
	}
	return l, laneReader{sr}, nil
}

// laneReader reads the current lane's bytes.
type laneReader struct{ sr *SnapshotReader }

func (lr laneReader) Read(p []byte) (int, error) {
	sr := lr.sr
	if sr.err != nil {
		return 0, sr.err
	}
	if sr.left == 0 {
		return 0, io.EOF
	}
	if uint64(len(p)) > sr.left {
		p = p[:sr.left]
	}
	n, err := sr.g.Read(p)
	sr.hasher.write(p[:n])
	sr.left -= uint64(n)
	if sr.left == 0 {
		l := sr.hdr.Lanes[sr.lane]
		if sr.hasher.sum != l.Checksum {
			sr.err = sr.wrap(corrupt(fmt.Sprintf("lane %d: checksum %s, header declares %s", l.Lane, sr.hasher.sum, l.Checksum)))
			return n, sr.err
		}
		return n, nil
	}
	switch {
	case err == io.EOF:
		sr.err = sr.wrap(corrupt(fmt.Sprintf("lane %d: content ends %d bytes early", sr.hdr.Lanes[sr.lane].Lane, sr.left)))
		return n, sr.err
	case err != nil:
		sr.err = sr.wrap(err)
		return n, sr.err
	}
	return n, nil
}
