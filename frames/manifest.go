package frames

import (
	"fmt"
	"io"

	capnp "capnproto.org/go/capnp/v3"

	wire "github.com/framectl/framectl/capnp"
)

// Manifest is a snapshot that lists its lanes as chunk objects instead of
// holding their bytes. It is stored at the snapshot key
// (Actor.SnapshotKey(Epoch, Seq)); its layout and the rules its reader
// enforces are under "Manifests" in the package documentation (doc.go).
type Manifest struct {
	Epoch      Epoch
	Seq        Seq   // state after every commit through Seq; 0 = before the first
	CommitTime int64 // Unix nanoseconds of commit Seq; 0 when Seq is 0
	// Predecessor is the session's lineage, the same in every manifest of
	// the session.
	Predecessor Lineage
	Lanes       []ManifestLane
}

// Lineage is where a session started: the state of session Epoch after
// commit Seq. Frames that session wrote past Seq are not the successor's
// history. The zero Lineage means the session started a new database.
type Lineage struct {
	Epoch Epoch
	Seq   Seq
}

// ManifestLane is one lane of a manifest: Pages pages of PageSize bytes,
// held by Chunks in order, each ChunkPages pages long except the last.
type ManifestLane struct {
	Lane       uint32
	Kind       LaneKind
	PageSize   uint32
	Pages      uint32
	Checksum   Checksum // of the whole lane (DatabaseChecksum); 0 when empty
	ChunkPages uint32
	Chunks     []ChunkRef
}

// Header returns what the manifest says of its lanes as a snapshot
// header: epoch, seq, commit time and each lane's size and checksum, so
// that what plans, compares or rebuilds states from either kind of
// snapshot needs one description of them.
func (m *Manifest) Header() Snapshot {
	h := Snapshot{Epoch: m.Epoch, Seq: m.Seq, CommitTime: m.CommitTime}
	for _, l := range m.Lanes {
		h.Lanes = append(h.Lanes, SnapshotLane{Lane: l.Lane, Kind: l.Kind, PageSize: l.PageSize, Bytes: l.Bytes(), Checksum: l.Checksum})
	}
	return h
}

// Bytes returns the lane's size in bytes.
func (l ManifestLane) Bytes() uint64 { return uint64(l.Pages) * uint64(l.PageSize) }

// ChunkRef names the chunk object that holds pages FirstPage through
// FirstPage+Pages-1 of a lane: Actor.ChunkKey(Hash), whose content is
// Pages times the lane's page size bytes long.
type ChunkRef struct {
	FirstPage  uint32 // 1-based
	Pages      uint32
	Hash       ChunkHash
	StoredSize uint64 // of the object when the manifest was written; advisory
	// Fingerprint is the XOR of the lane's page hashes over the range (the
	// terms of the rolling checksum, lanes.Tracker.Fingerprint): a writer
	// whose tracker gives the same value names this chunk without reading
	// the pages. 0: not recorded.
	Fingerprint uint64
}

// Bounds of a chunk object's stored size, which a manifest records. The
// smallest object is the gzip header, trailer and seal around a deflate
// stream of at least 2 bytes; the largest is its content stored
// uncompressed (DEFLATE's stored blocks add 5 bytes per 65,535) plus the
// header message and the framing, with room for another compressor:
// content/64 + 4 KiB.
const minChunkObjectSize = len(gzipHeader) + 2 + gzipTrailerLen + sealLen

func maxChunkObjectSize(content uint64) uint64 { return content + content/64 + 4<<10 }

// chunkRefWireSize is what one chunk reference takes of a manifest message
// as the writer lays it out: a list element of three data words and a
// pointer, and the 32-byte hash it points to. minChunkRefWireSize is what
// it took before the fingerprint (two data words): a message of n bytes
// holds at most n/minChunkRefWireSize of them, and a list claiming more is
// refused before anything is allocated for it.
const (
	chunkRefWireSize    = 32 + 32
	minChunkRefWireSize = 24 + 32
)

// validate checks a manifest on its own: every rule of "Manifests" in
// doc.go that needs no other object.
func (m *Manifest) validate(lim Limits) error {
	p := m.Predecessor
	switch {
	case p.Epoch == 0 && p.Seq != 0:
		return corrupt(fmt.Sprintf("lineage names seq %d of no predecessor (epoch 0)", p.Seq))
	case p.Epoch != 0 && p.Epoch >= m.Epoch:
		return corrupt(fmt.Sprintf("predecessor epoch %d is not below the manifest's epoch %d", p.Epoch, m.Epoch))
	case p.Epoch != 0 && p.Seq > m.Seq:
		return corrupt(fmt.Sprintf("the session continued from seq %d, past the manifest's seq %d", p.Seq, m.Seq))
	case len(m.Lanes) > lim.MaxLanes:
		return tooLarge(fmt.Sprintf("%d lanes, limit %d", len(m.Lanes), lim.MaxLanes))
	}
	var total uint64
	for i := range m.Lanes {
		l := &m.Lanes[i]
		if i > 0 && l.Lane <= m.Lanes[i-1].Lane {
			return corrupt(fmt.Sprintf("lanes not strictly ascending (%d after %d)", l.Lane, m.Lanes[i-1].Lane))
		}
		if err := l.validate(lim); err != nil {
			return err
		}
		total += l.Bytes()
		if total > lim.MaxSnapshotBytes {
			return tooLarge(fmt.Sprintf("lanes hold more than the %d-byte limit", lim.MaxSnapshotBytes))
		}
	}
	return nil
}

func (l *ManifestLane) validate(lim Limits) error {
	switch {
	case l.Kind != LaneSQLitePages:
		return unknownKind(fmt.Sprintf("lane %d has unknown kind %d", l.Lane, l.Kind))
	case !ValidPageSize(l.PageSize):
		return corrupt(fmt.Sprintf("lane %d: page size %d is not a power of two in 512..65536", l.Lane, l.PageSize))
	case l.Pages > MaxDatabasePages:
		return corrupt(fmt.Sprintf("lane %d: %d pages exceeds SQLite's maximum", l.Lane, l.Pages))
	case l.ChunkPages == 0:
		return corrupt(fmt.Sprintf("lane %d: chunks of 0 pages", l.Lane))
	case uint64(l.ChunkPages)*uint64(l.PageSize) > lim.MaxChunkBytes:
		return tooLarge(fmt.Sprintf("lane %d: chunks of %d pages of %d bytes exceed the %d-byte chunk limit",
			l.Lane, l.ChunkPages, l.PageSize, lim.MaxChunkBytes))
	case l.Pages == 0 && l.Checksum != 0:
		return corrupt(fmt.Sprintf("lane %d is empty but declares checksum %s", l.Lane, l.Checksum))
	}
	want := (uint64(l.Pages) + uint64(l.ChunkPages) - 1) / uint64(l.ChunkPages)
	if uint64(len(l.Chunks)) != want {
		return corrupt(fmt.Sprintf("lane %d: %d chunks, but %d pages in chunks of %d pages take %d",
			l.Lane, len(l.Chunks), l.Pages, l.ChunkPages, want))
	}
	next := uint64(1) // the page the next chunk must start at
	for i, c := range l.Chunks {
		pages := min(uint64(l.ChunkPages), uint64(l.Pages)-next+1)
		switch {
		case uint64(c.FirstPage) != next:
			return corrupt(fmt.Sprintf("lane %d: chunk %d starts at page %d, want %d (chunks are contiguous from page 1)",
				l.Lane, i, c.FirstPage, next))
		case uint64(c.Pages) != pages:
			return corrupt(fmt.Sprintf("lane %d: chunk %d holds %d pages, want %d (every chunk but the last holds %d)",
				l.Lane, i, c.Pages, pages, l.ChunkPages))
		}
		size := uint64(c.Pages) * uint64(l.PageSize)
		if c.StoredSize < uint64(minChunkObjectSize) || c.StoredSize > maxChunkObjectSize(size) {
			return corrupt(fmt.Sprintf("lane %d: chunk %d of %d bytes claims a stored size of %d bytes",
				l.Lane, i, size, c.StoredSize))
		}
		next += uint64(c.Pages)
	}
	return nil
}

// WriteManifest encodes m as a manifest object into w; its key is
// Actor.SnapshotKey(m.Epoch, m.Seq). It refuses (ErrInvalid) a manifest
// that a reader with default Limits would refuse. It checks the layout of
// the chunks, not their content: that each ChunkRef names the chunk of
// those pages is the caller's to ensure (WriteChunk returns the hash and
// stored size).
func WriteManifest(w io.Writer, m Manifest, opts WriteOptions) error {
	opts = opts.withDefaults()
	fail := func(err error) error { return &Error{Object: "manifest", Err: err} }
	if err := m.validate(Limits{}.withDefaults()); err != nil {
		return fail(asInvalid(err))
	}
	chunks := 0
	for _, l := range m.Lanes {
		chunks += len(l.Chunks)
	}
	msg, seg, err := newMessage(128 + 48*len(m.Lanes) + chunkRefWireSize*chunks)
	if err != nil {
		return fail(err)
	}
	if err := buildManifest(seg, &m); err != nil {
		return fail(err)
	}
	data, err := msg.Marshal()
	if err != nil {
		return fail(err)
	}
	if uint64(len(data)) > DefaultMaxManifestSize {
		return fail(tooLarge(fmt.Sprintf("manifest of %d bytes exceeds what readers accept by default (%d)", len(data), uint64(DefaultMaxManifestSize))))
	}
	gz, err := newGzipWriter(w, opts.Level)
	if err != nil {
		return fail(err)
	}
	if _, err := gz.Write(data); err != nil {
		return fail(err)
	}
	if err := gz.Close(); err != nil {
		return fail(err)
	}
	return nil
}

func buildManifest(seg *capnp.Segment, m *Manifest) error {
	mh, err := wire.NewRootManifest(seg)
	if err != nil {
		return err
	}
	mh.SetVersion(wire.ManifestFormatVersion)
	mh.SetEpoch(uint64(m.Epoch))
	mh.SetSeq(uint64(m.Seq))
	mh.SetCommitTime(m.CommitTime)
	mh.SetPredecessorEpoch(uint64(m.Predecessor.Epoch))
	mh.SetPredecessorSeq(uint64(m.Predecessor.Seq))
	ll, err := mh.NewLanes(int32(len(m.Lanes)))
	if err != nil {
		return err
	}
	for i, l := range m.Lanes {
		e := ll.At(i)
		e.SetLane(l.Lane)
		e.SetKind(wire.LaneKind(l.Kind))
		e.SetPageSize(l.PageSize)
		e.SetPageCount(l.Pages)
		e.SetChecksum(uint64(l.Checksum))
		e.SetChunkPages(l.ChunkPages)
		cl, err := e.NewChunks(int32(len(l.Chunks)))
		if err != nil {
			return err
		}
		for j, c := range l.Chunks {
			r := cl.At(j)
			r.SetFirstPage(c.FirstPage)
			r.SetPageCount(c.Pages)
			r.SetStoredSize(c.StoredSize)
			r.SetFingerprint(c.Fingerprint)
			if err := r.SetHash(c.Hash[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadManifest reads a whole manifest object and returns it once
// everything verified: the gzip trailer and the seal, every rule of
// "Manifests" in doc.go, and then the key. key names the object in errors;
// when it parses as a snapshot key, the manifest's epoch and seq must be
// its own ([KeyMismatchError] otherwise). A full snapshot (format version
// 1) is refused with ErrUnknownKind: OpenSnapshot reads either.
//
// What it cannot check without other objects is the caller's: that each
// chunk exists and holds its pages (ReadChunk, with the key
// Actor.ChunkKey(ref.Hash) and the size ref.Pages * PageSize), and that
// the pages have the lane's checksum.
func ReadManifest(r io.Reader, key string, lim Limits) (Manifest, error) {
	lim = lim.withDefaults()
	fail := func(err error) (Manifest, error) {
		return Manifest{}, &Error{Object: "manifest", Key: key, Err: err}
	}
	g, err := newGzipReader(r, lim.MaxManifestSize)
	if err != nil {
		return fail(err)
	}
	defer g.release()
	mlim := lim
	mlim.MaxMessageSize = lim.MaxManifestSize
	msg, size, err := newMsgReader(g, mlim).next()
	if err == io.EOF {
		return fail(corrupt("no manifest message"))
	}
	if err != nil {
		return fail(err)
	}
	// The version first: the layout of what follows depends on it.
	switch v, err := messageVersion(msg); {
	case err != nil:
		return fail(err)
	case v == wire.FormatVersion:
		return fail(unknownKind(fmt.Sprintf("a full snapshot (format version %d), not a manifest (format version %d)", v, wire.ManifestFormatVersion)))
	case v != wire.ManifestFormatVersion:
		return fail(unknownVersion(v))
	}
	m, err := finishManifest(g, msg, size, key, lim)
	if err != nil {
		return fail(err)
	}
	return m, nil
}

// messageVersion reads the version field of a snapshot object's first
// message, which SnapshotHeader and Manifest keep at the same place.
func messageVersion(msg *capnp.Message) (uint16, error) {
	sh, err := wire.ReadRootSnapshotHeader(msg)
	if err != nil {
		return 0, corruptCause("snapshot header", err)
	}
	return sh.Version(), nil
}

// finishManifest checks that the object ends right after the manifest
// message, then decodes and validates the message and compares it with the
// key: the manifest is read whole, so nothing is judged before the seal
// proves the bytes are the ones written.
func finishManifest(g *gzipReader, msg *capnp.Message, size uint64, key string, lim Limits) (Manifest, error) {
	if err := g.verifyEnd(); err != nil {
		return Manifest{}, err
	}
	m, err := decodeManifest(msg, size, lim)
	if err != nil {
		return Manifest{}, err
	}
	if err := m.validate(lim); err != nil {
		return Manifest{}, err
	}
	if k, err := ParseKey(key); err == nil {
		if k.Kind != KeySnapshot {
			return Manifest{}, invalid("key names a " + k.Kind.String() + " object, not a snapshot")
		}
		if k.Epoch != m.Epoch || k.Seq != m.Seq {
			return Manifest{}, &KeyMismatchError{Key: k, Epoch: m.Epoch, FirstSeq: m.Seq, LastSeq: m.Seq}
		}
	}
	return m, nil
}

// decodeManifest converts a Manifest message, allocating only for lists the
// message can hold.
func decodeManifest(msg *capnp.Message, size uint64, lim Limits) (Manifest, error) {
	mh, err := wire.ReadRootManifest(msg)
	if err != nil {
		return Manifest{}, corruptCause("manifest", err)
	}
	if v := mh.Version(); v != wire.ManifestFormatVersion {
		return Manifest{}, unknownVersion(v)
	}
	m := Manifest{Epoch: Epoch(mh.Epoch()), Seq: Seq(mh.Seq()), CommitTime: mh.CommitTime(),
		Predecessor: Lineage{Epoch: Epoch(mh.PredecessorEpoch()), Seq: Seq(mh.PredecessorSeq())}}
	ll, err := mh.Lanes()
	if err != nil {
		return Manifest{}, corruptCause("manifest lanes", err)
	}
	// A lane entry takes at least 8 bytes of message.
	if ll.Len() > lim.MaxLanes || uint64(ll.Len())*8 > size {
		return Manifest{}, tooLarge(fmt.Sprintf("%d lanes in a %d-byte manifest (limit %d lanes)", ll.Len(), size, lim.MaxLanes))
	}
	if ll.Len() > 0 {
		m.Lanes = make([]ManifestLane, ll.Len())
	}
	var refs uint64 // chunk references so far, of every lane
	for i := range m.Lanes {
		e := ll.At(i)
		l := ManifestLane{Lane: e.Lane(), Kind: LaneKind(e.Kind()), PageSize: e.PageSize(), Pages: e.PageCount(),
			Checksum: Checksum(e.Checksum()), ChunkPages: e.ChunkPages()}
		cl, err := e.Chunks()
		if err != nil {
			return Manifest{}, corruptCause(fmt.Sprintf("lane %d: chunk list", l.Lane), err)
		}
		// Counted across lanes: lanes that share one list through their
		// pointers cannot multiply what is allocated.
		refs += uint64(cl.Len())
		if refs*minChunkRefWireSize > size {
			return Manifest{}, tooLarge(fmt.Sprintf("lane %d: %d chunk references so far, more than a %d-byte manifest holds", l.Lane, refs, size))
		}
		if cl.Len() > 0 {
			l.Chunks = make([]ChunkRef, cl.Len())
		}
		for j := range l.Chunks {
			c := cl.At(j)
			h, err := c.Hash()
			if err != nil {
				return Manifest{}, corruptCause(fmt.Sprintf("lane %d: chunk %d hash", l.Lane, j), err)
			}
			if len(h) != len(ChunkHash{}) {
				return Manifest{}, corrupt(fmt.Sprintf("lane %d: chunk %d has a hash of %d bytes, want %d", l.Lane, j, len(h), len(ChunkHash{})))
			}
			r := &l.Chunks[j]
			*r = ChunkRef{FirstPage: c.FirstPage(), Pages: c.PageCount(), StoredSize: c.StoredSize(), Fingerprint: c.Fingerprint()}
			copy(r.Hash[:], h)
		}
		m.Lanes[i] = l
	}
	return m, nil
}

// OpenSnapshot reads the first message of a snapshot object, which holds
// either a full snapshot (format version 1, "Snapshot files" in doc.go) or
// a manifest (format version 2, "Manifests"), and returns a reader of the
// full snapshot's lanes or the verified manifest: exactly one of the two
// is non-nil when the error is nil. A reader of snapshot keys calls it so
// that a bucket written before manifests existed still restores.
//
// The first message may be as large as the larger of Limits.MaxMessageSize
// and Limits.MaxManifestSize until its version is known; a full snapshot's
// header is then held to MaxMessageSize.
func OpenSnapshot(r io.Reader, key string, lim Limits) (*SnapshotReader, *Manifest, error) {
	lim = lim.withDefaults()
	wrap := func(object string, err error) error {
		if _, ok := err.(*Error); ok {
			return err
		}
		return &Error{Object: object, Key: key, Err: err}
	}
	g, err := newGzipReader(r, max(lim.MaxSnapshotBytes, lim.MaxManifestSize))
	if err != nil {
		return nil, nil, wrap("snapshot", err)
	}
	flim := lim
	flim.MaxMessageSize = max(lim.MaxMessageSize, lim.MaxManifestSize)
	msg, size, err := newMsgReader(g, flim).next()
	if err == io.EOF {
		err = corrupt("no snapshot header")
	}
	if err != nil {
		g.release()
		return nil, nil, wrap("snapshot", err)
	}
	v, err := messageVersion(msg)
	if err != nil {
		g.release()
		return nil, nil, wrap("snapshot", err)
	}
	switch v {
	case wire.FormatVersion:
		if size > lim.MaxMessageSize {
			g.release()
			return nil, nil, wrap("snapshot", tooLarge(fmt.Sprintf("snapshot header of %d bytes, larger than the limit (%d)", size, lim.MaxMessageSize)))
		}
		g.max = lim.MaxSnapshotBytes
		sr := &SnapshotReader{key: key, lane: -1, g: g}
		if err := sr.start(msg, size, lim); err != nil {
			g.release()
			return nil, nil, err
		}
		return sr, nil, nil
	case wire.ManifestFormatVersion:
		defer g.release()
		g.max = lim.MaxManifestSize
		m, err := finishManifest(g, msg, size, key, lim)
		if err != nil {
			return nil, nil, wrap("manifest", err)
		}
		return nil, &m, nil
	}
	g.release()
	return nil, nil, wrap("snapshot", unknownVersion(v))
}

// unknownVersion is the error for a snapshot object of a format version
// this build does not know, perhaps written by a newer framectl.
func unknownVersion(v uint16) error {
	return unknownKind(fmt.Sprintf("format version %d (this build reads snapshots of version %d and manifests of version %d)",
		v, wire.FormatVersion, wire.ManifestFormatVersion))
}
