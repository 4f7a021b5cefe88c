package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

var inspectUsage = usage{forms: []string{"--bucket KEY [--pages] [--json [-v]]", "FILE [--kind] [--pages] [--json [-v]]"},
	hint: "framectl inspect --bucket file:///path/to/bucket do/NSID/ACTOR/log/EPOCH/SEQ", help: `
Decodes one object and prints what it holds, reading it to the end so that
its gzip trailer or zstd checksum, seal, lengths and checksums are verified:
  batch      the header (epoch, sequence numbers, frame count), then every
             frame: sequence numbers, lane, kind, page count and numbers,
             database size, checksum before and after, commit time
  snapshot   the header (epoch, sequence number, commit time) and every
             lane: page size, pages, bytes, checksum; for a manifest also
             the session's lineage and every lane's chunks (page range,
             hash, stored size). The chunks are other objects: inspect
             each, or let verify read them all
  chunk      a chunk's header (its length and the hash of its content)
  own.json   the ownership record as parsed (epoch, node, address)
  lease      a node lease (nodes/<node>.json) as parsed: node, address,
             heartbeat, fenced
Page bytes are printed (as hex) only with --pages (a chunk's, as one run of
bytes: the page size is its manifest's).

Without --bucket, the argument is a local file, for example an object of a
directory bucket or one downloaded with another tool; its kind is taken from
the do/... or nodes/... part of its path, else from its content.

A damaged object prints what decoded before the damage and exits 1.

Examples:
  framectl inspect --bucket file:///tmp/b do/Sx1CEZLQgCtH3lmtBp0oqA/64656d6f/log/fe/3bb8
  framectl inspect --bucket file:///tmp/b do/Sx1CEZLQgCtH3lmtBp0oqA/64656d6f/own.json --json
  framectl inspect /tmp/b/do/Sx1CEZLQgCtH3lmtBp0oqA/64656d6f/snapshot/fe/ff --pages
`}

// Object kinds inspect recognises.
const (
	kindBatch    = "batch"
	kindSnapshot = "snapshot"
	kindOwn      = "own"
	kindNode     = "node"
	kindChunk    = "chunk"
)

type inspectReport struct {
	Source   string           `json:"source"` // bucket URL or local file
	Key      string           `json:"key"`
	Kind     string           `json:"kind"`
	Size     int64            `json:"size"`
	Batch    *inspectBatch    `json:"batch,omitempty"`
	Snapshot *inspectSnapshot `json:"snapshot,omitempty"`
	Chunk    *inspectChunk    `json:"chunk,omitempty"`
	Own      *fence.Record    `json:"own,omitempty"`
	Node     *fence.Lease     `json:"node,omitempty"`
	// Verified: the whole object was read and every check passed.
	Verified bool       `json:"verified"`
	Error    *jsonError `json:"error,omitempty"` // the damage
}

type inspectBatch struct {
	Epoch         frames.Epoch   `json:"epoch"`
	FirstSeq      frames.Seq     `json:"firstSeq"`
	LastSeq       frames.Seq     `json:"lastSeq"`
	FrameMessages uint32         `json:"frameMessages"`
	Frames        []inspectFrame `json:"frames"`
}

type inspectFrame struct {
	FirstSeq       frames.Seq    `json:"firstSeq"`
	LastSeq        frames.Seq    `json:"lastSeq"`
	Epoch          frames.Epoch  `json:"epoch"`
	Lane           uint32        `json:"lane"`
	Kind           string        `json:"kind"`
	CommitTime     *time.Time    `json:"commitTime,omitempty"`
	NewLaneKind    string        `json:"newLaneKind,omitempty"`
	PageSize       uint32        `json:"pageSize,omitempty"`
	DatabasePages  uint32        `json:"databasePages,omitempty"`
	ChecksumBefore string        `json:"checksumBefore,omitempty"`
	ChecksumAfter  string        `json:"checksumAfter,omitempty"`
	PageCount      int           `json:"pageCount"`
	PageNumbers    string        `json:"pageNumbers,omitempty"` // ranges: "1-3,7"
	Parts          int           `json:"parts"`                 // messages the frame was split into
	Pages          []inspectPage `json:"pages,omitempty"`       // --pages
	pageNums       []uint32
}

type inspectPage struct {
	Number uint32 `json:"number"`
	Data   string `json:"data"` // hex
}

type inspectSnapshot struct {
	Epoch      frames.Epoch  `json:"epoch"`
	Seq        frames.Seq    `json:"seq"`
	CommitTime *time.Time    `json:"commitTime,omitempty"`
	Lanes      []inspectLane `json:"lanes"`
	// Manifest is set when the snapshot is a manifest of chunks.
	Manifest *inspectManifest `json:"manifest,omitempty"`
}

type inspectManifest struct {
	// Predecessor is the session's lineage; nil: it started a new database.
	Predecessor *lsLineage             `json:"predecessor,omitempty"`
	Lanes       []inspectManifestLanes `json:"lanes"`
}

type inspectManifestLanes struct {
	Lane       uint32         `json:"lane"`
	ChunkPages uint32         `json:"chunkPages"`
	Chunks     []inspectChunk `json:"chunks"`
}

// inspectChunk is a chunk as a manifest names it, or a chunk object's
// header (then without pages).
type inspectChunk struct {
	FirstPage  uint32           `json:"firstPage,omitempty"`
	Pages      uint32           `json:"pages,omitempty"`
	Bytes      uint64           `json:"bytes,omitempty"` // a chunk object's content length
	Hash       frames.ChunkHash `json:"hash"`
	StoredSize uint64           `json:"storedSize,omitempty"`
	Data       string           `json:"data,omitempty"` // --pages: hex
}

type inspectLane struct {
	Lane     uint32          `json:"lane"`
	Kind     string          `json:"kind"`
	PageSize uint32          `json:"pageSize"`
	Pages    uint64          `json:"pages"`
	Bytes    uint64          `json:"bytes"`
	Checksum frames.Checksum `json:"checksum"`
	Data     []inspectPage   `json:"data,omitempty"` // --pages
}

// maxLeaseBytes bounds a node lease read by inspect: fence.ParseLease
// refuses more than a record's bound too.
const maxLeaseBytes = fence.MaxRecordBytes

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newFlags("inspect", inspectUsage, stdout, stderr)
	url := c.bucketFlag()
	pages := c.fs.Bool("pages", false, "also print page bytes, as hex")
	forceKind := c.fs.String("kind", "", "a local file's `KIND` (batch, snapshot, chunk, own, node) when its path does not say")
	out := c.outputFlags()
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	switch *forceKind {
	case "", kindBatch, kindSnapshot, kindOwn, kindNode, kindChunk:
	default:
		return c.usageError("--kind %q: batch, snapshot, chunk, own or node", *forceKind)
	}
	switch {
	case len(pos) == 0 && *url != "":
		return c.usageError("which object? give its KEY after the flags (framectl ls lists them)")
	case len(pos) == 0:
		return c.usageError("give an object KEY with --bucket, or a local FILE")
	case len(pos) > 1:
		return c.usageError("one object at a time: unexpected %q", pos[1])
	}

	var (
		rep  = &inspectReport{Key: pos[0]}
		body io.ReadCloser
		err  error
		kind string
	)
	if *url != "" {
		k, err := frames.ParseKey(pos[0])
		if err != nil {
			return c.usageError("%v", err)
		}
		b, code, ok := c.openBucket(ctx, *url)
		if !ok {
			return code
		}
		kind = kindOfKey(k.Kind)
		rep.Source = b.String()
		var info bucket.Info
		body, info, err = b.Get(ctx, pos[0])
		if err != nil {
			return c.fail(err)
		}
		rep.Size = info.Size
	} else {
		rep.Source = pos[0]
		var k string
		k, kind = keyOfPath(pos[0])
		if k != "" {
			rep.Key = k
		}
		f, err := os.Open(pos[0])
		if err != nil {
			return c.fail(err)
		}
		if st, err := f.Stat(); err == nil {
			rep.Size = st.Size()
		}
		body = f
		if kind == "" {
			kind = *forceKind
		}
		if kind == "" {
			if kind, err = sniff(f); err != nil {
				f.Close()
				return c.fail(err)
			}
		}
	}
	defer body.Close()
	rep.Kind = kind
	text := !out.json
	if text {
		fmt.Fprintf(stdout, "%s %s (%d bytes, from %s)\n", kind, rep.Key, rep.Size, rep.Source)
	}
	switch kind {
	case kindBatch:
		err = inspectBatchObject(body, rep, *pages, text, stdout)
	case kindSnapshot:
		err = inspectSnapshotObject(body, rep, *pages, text, stdout)
	case kindChunk:
		err = inspectChunkObject(body, rep, *pages, text, stdout)
	case kindOwn:
		err = inspectOwn(body, rep, text, stdout)
	case kindNode:
		err = inspectNode(body, rep, text, stdout)
	default:
		err = fmt.Errorf("%s: %w: not a batch, snapshot, chunk, own.json or node lease", rep.Key, frames.ErrDamage)
	}
	if err != nil && !errors.Is(err, frames.ErrDamage) {
		return c.fail(err) // the bucket or the disk, not the object
	}
	rep.Verified = err == nil
	if err != nil {
		rep.Error = newJSONError(exitDamage, err)
	}
	if out.json {
		if werr := c.emit(rep); werr != nil {
			return c.fail(werr)
		}
	} else if err == nil {
		fmt.Fprintln(stdout, "verified: the whole object was read and every check passed")
	}
	if err != nil {
		fmt.Fprintf(stderr, "framectl inspect: DAMAGED: %s\n", oneLine(err.Error()))
		return exitDamage
	}
	return exitOK
}

func kindOfKey(k frames.KeyKind) string {
	switch k {
	case frames.KeyLog:
		return kindBatch
	case frames.KeySnapshot:
		return kindSnapshot
	case frames.KeyOwn:
		return kindOwn
	case frames.KeyNode:
		return kindNode
	case frames.KeyChunk:
		return kindChunk
	}
	return ""
}

// keyOfPath finds an object key at the end of a local path
// (".../bucket/do/<ns>/<actor>/log/<s>/<f>") and the kind it names.
func keyOfPath(path string) (key, kind string) {
	p := filepath.ToSlash(path)
	for i := 0; i < len(p); i++ {
		if i > 0 && p[i-1] != '/' {
			continue
		}
		rest := p[i:]
		if !strings.HasPrefix(rest, "do/") && !strings.HasPrefix(rest, frames.NodesPrefix) {
			continue
		}
		if k, err := frames.ParseKey(rest); err == nil {
			return rest, kindOfKey(k.Kind)
		}
	}
	return "", ""
}

// sniff guesses a local file's kind from its content. A zstd skippable
// frame first is a chunk (frames' doc, "Chunk files"). Gzip is a batch, a
// snapshot (a full one or a manifest) or a chunk as written before zstd
// chunk files: their headers alone do
// not tell them apart (Cap'n Proto structs carry no type), so the file is
// read as a batch, then as a chunk, then as a snapshot; a file damaged so
// that none reads whole is taken for a snapshot if its header lists lanes,
// else for a batch. JSON is own.json if it parses as one, else a node
// lease. The file is rewound.
func sniff(f *os.File) (string, error) {
	defer f.Seek(0, io.SeekStart)
	head := make([]byte, 4)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	head = head[:n]
	rewind := func() error {
		_, err := f.Seek(0, io.SeekStart)
		return err
	}
	if err := rewind(); err != nil {
		return "", err
	}
	switch {
	case bytes.Equal(head, []byte{0x50, 0x2a, 0x4d, 0x18}):
		return kindChunk, nil
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		_, _, err := frames.ReadBatch(f, "", frames.Limits{})
		if err == nil {
			return kindBatch, nil
		}
		if err := rewind(); err != nil {
			return "", err
		}
		if _, _, err := frames.ReadChunk(f, "", 0, nil, frames.Limits{}); err == nil {
			return kindChunk, nil
		}
		if err := rewind(); err != nil {
			return "", err
		}
		sr, m, err := frames.OpenSnapshot(f, "", frames.Limits{})
		if m != nil {
			return kindSnapshot, nil
		}
		if err != nil {
			return kindBatch, nil
		}
		if len(sr.Header().Lanes) > 0 {
			return kindSnapshot, nil
		}
		for {
			if _, _, err := sr.NextLane(); err == io.EOF {
				return kindSnapshot, nil
			} else if err != nil {
				return kindBatch, nil
			}
		}
	case len(head) > 0:
		data, err := io.ReadAll(io.LimitReader(f, maxLeaseBytes))
		if err != nil {
			return "", err
		}
		if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
			return "", nil
		}
		if _, err := fence.ParseRecord("", data); err == nil {
			return kindOwn, nil
		}
		return kindNode, nil
	}
	return "", nil
}

func inspectBatchObject(r io.Reader, rep *inspectReport, withPages, text bool, w io.Writer) error {
	br, err := frames.NewBatchReader(r, rep.Key, frames.Limits{})
	if err != nil {
		return err
	}
	h := br.Header()
	rep.Batch = &inspectBatch{Epoch: h.Epoch, FirstSeq: h.FirstSeq, LastSeq: h.LastSeq, FrameMessages: h.FrameCount, Frames: []inspectFrame{}}
	if text {
		fmt.Fprintf(w, "header: epoch %d, seq %d..%d, %d frame messages\n", h.Epoch, h.FirstSeq, h.LastSeq, h.FrameCount)
	}
	var cur *inspectFrame // a frame whose parts are still arriving
	for {
		f, err := br.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if cur != nil {
				emitFrame(rep, cur, text, w) // what decoded before the damage
			}
			return err
		}
		if cur == nil {
			cur = newInspectFrame(f)
		}
		cur.Parts++
		if f.Kind == frames.KindSQLitePages {
			for _, p := range f.SQLite.Pages {
				cur.pageNums = append(cur.pageNums, p.Number)
				if withPages {
					cur.Pages = append(cur.Pages, inspectPage{Number: p.Number, Data: hex.EncodeToString(p.Data)})
				}
			}
			if f.SQLite.Continued {
				continue
			}
		}
		emitFrame(rep, cur, text, w)
		cur = nil
	}
}

func newInspectFrame(f *frames.Frame) *inspectFrame {
	fr := &inspectFrame{FirstSeq: f.FirstSeq, LastSeq: f.LastSeq, Epoch: f.Epoch, Lane: f.Lane,
		Kind: f.Kind.String(), CommitTime: unixNanoTime(f.CommitTime)}
	switch f.Kind {
	case frames.KindSQLitePages:
		fr.PageSize, fr.DatabasePages = f.SQLite.PageSize, f.SQLite.DatabasePages
		fr.ChecksumBefore, fr.ChecksumAfter = f.SQLite.Before.String(), f.SQLite.After.String()
	case frames.KindNewLane:
		fr.NewLaneKind = f.NewLane.String()
	}
	return fr
}

func emitFrame(rep *inspectReport, f *inspectFrame, text bool, w io.Writer) {
	f.PageCount, f.PageNumbers = len(f.pageNums), pageRanges(f.pageNums)
	if text {
		fmt.Fprintf(w, "frame %d..%d  epoch %d  lane %d  %s", f.FirstSeq, f.LastSeq, f.Epoch, f.Lane, f.Kind)
		if f.Kind == frames.KindSQLitePages.String() {
			fmt.Fprintf(w, "  %d pages [%s] of %d  page size %d  checksum %s -> %s",
				f.PageCount, f.PageNumbers, f.DatabasePages, f.PageSize, f.ChecksumBefore, f.ChecksumAfter)
		}
		if f.NewLaneKind != "" {
			fmt.Fprintf(w, "  %s", f.NewLaneKind)
		}
		if f.CommitTime != nil {
			fmt.Fprintf(w, "  committed %s", f.CommitTime.Format(time.RFC3339Nano))
		}
		if f.Parts > 1 {
			fmt.Fprintf(w, "  (%d parts)", f.Parts)
		}
		fmt.Fprintln(w)
		for _, p := range f.Pages {
			dumpPage(w, p)
		}
		return
	}
	f.pageNums = nil
	rep.Batch.Frames = append(rep.Batch.Frames, *f)
}

func dumpPage(w io.Writer, p inspectPage) {
	data, _ := hex.DecodeString(p.Data)
	fmt.Fprintf(w, "  page %d:\n", p.Number)
	for line := range strings.Lines(hex.Dump(data)) {
		fmt.Fprint(w, "    ", line)
	}
}

func inspectSnapshotObject(r io.Reader, rep *inspectReport, withPages, text bool, w io.Writer) error {
	sr, m, err := frames.OpenSnapshot(r, rep.Key, frames.Limits{})
	if err != nil {
		return err
	}
	if m != nil {
		inspectManifestObject(m, rep, text, w)
		return nil
	}
	h := sr.Header()
	rep.Snapshot = &inspectSnapshot{Epoch: h.Epoch, Seq: h.Seq, CommitTime: unixNanoTime(h.CommitTime), Lanes: []inspectLane{}}
	if text {
		fmt.Fprintf(w, "header: epoch %d, through seq %d, committed %s, %d lanes\n", h.Epoch, h.Seq, fmtUnixNano(h.CommitTime), len(h.Lanes))
		t := newTable(w)
		fmt.Fprintln(t, "LANE\tKIND\tPAGE SIZE\tPAGES\tBYTES\tCHECKSUM")
		for _, l := range h.Lanes {
			fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%s\n", l.Lane, l.Kind, l.PageSize, l.Pages(), l.Bytes, l.Checksum)
		}
		t.Flush()
	}
	for _, l := range h.Lanes {
		rep.Snapshot.Lanes = append(rep.Snapshot.Lanes, inspectLane{Lane: l.Lane, Kind: l.Kind.String(),
			PageSize: l.PageSize, Pages: l.Pages(), Bytes: l.Bytes, Checksum: l.Checksum})
	}
	for i := 0; ; i++ {
		l, lr, err := sr.NextLane() // verifies the lane before it
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !withPages {
			continue
		}
		if text {
			fmt.Fprintf(w, "lane %d:\n", l.Lane)
		}
		page := make([]byte, l.PageSize)
		for n := uint32(1); ; n++ {
			if _, err := io.ReadFull(lr, page); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			p := inspectPage{Number: n, Data: hex.EncodeToString(page)}
			if text {
				dumpPage(w, p)
			} else {
				rep.Snapshot.Lanes[i].Data = append(rep.Snapshot.Lanes[i].Data, p)
			}
		}
	}
}

// inspectManifestObject reports a manifest, read whole and verified.
func inspectManifestObject(m *frames.Manifest, rep *inspectReport, text bool, w io.Writer) {
	h := m.Header()
	snap := &inspectSnapshot{Epoch: h.Epoch, Seq: h.Seq, CommitTime: unixNanoTime(h.CommitTime), Lanes: []inspectLane{},
		Manifest: &inspectManifest{Lanes: []inspectManifestLanes{}}}
	if p := m.Predecessor; p.Epoch != 0 {
		snap.Manifest.Predecessor = &lsLineage{Epoch: p.Epoch, Seq: p.Seq}
	}
	rep.Snapshot = snap
	for _, l := range h.Lanes {
		snap.Lanes = append(snap.Lanes, inspectLane{Lane: l.Lane, Kind: l.Kind.String(),
			PageSize: l.PageSize, Pages: l.Pages(), Bytes: l.Bytes, Checksum: l.Checksum})
	}
	for _, l := range m.Lanes {
		ml := inspectManifestLanes{Lane: l.Lane, ChunkPages: l.ChunkPages, Chunks: []inspectChunk{}}
		for _, c := range l.Chunks {
			ml.Chunks = append(ml.Chunks, inspectChunk{FirstPage: c.FirstPage, Pages: c.Pages, Hash: c.Hash, StoredSize: c.StoredSize})
		}
		snap.Manifest.Lanes = append(snap.Manifest.Lanes, ml)
	}
	if !text {
		return
	}
	fmt.Fprintf(w, "manifest: epoch %d, through seq %d, committed %s, %d lanes; %s\n", h.Epoch, h.Seq, fmtUnixNano(h.CommitTime),
		len(h.Lanes), lineageNote(snap.Manifest.Predecessor))
	t := newTable(w)
	fmt.Fprintln(t, "LANE\tKIND\tPAGE SIZE\tPAGES\tBYTES\tCHECKSUM\tCHUNKS")
	for i, l := range h.Lanes {
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%s\t%d of %d pages\n", l.Lane, l.Kind, l.PageSize, l.Pages(), l.Bytes, l.Checksum,
			len(m.Lanes[i].Chunks), m.Lanes[i].ChunkPages)
	}
	t.Flush()
	for _, l := range snap.Manifest.Lanes {
		fmt.Fprintf(w, "lane %d chunks:\n", l.Lane)
		t := newTable(w)
		fmt.Fprintln(t, "  PAGES\tSTORED\tHASH")
		for _, c := range l.Chunks {
			fmt.Fprintf(t, "  %d..%d\t%d\t%s\n", c.FirstPage, c.FirstPage+c.Pages-1, c.StoredSize, c.Hash)
		}
		t.Flush()
	}
	fmt.Fprintln(w, "(the chunks are other objects, chunk/<hash>: framectl verify reads and checks them all)")
}

// inspectChunkObject reads a chunk to its verified end.
func inspectChunkObject(r io.Reader, rep *inspectReport, withPages, text bool, w io.Writer) error {
	h, content, err := frames.ReadChunk(r, rep.Key, 0, nil, frames.Limits{})
	if err != nil {
		return err
	}
	rep.Chunk = &inspectChunk{Bytes: h.Bytes, Hash: h.Hash}
	if withPages {
		rep.Chunk.Data = hex.EncodeToString(content)
	}
	if text {
		fmt.Fprintf(w, "chunk: %d bytes, content hash %s\n", h.Bytes, h.Hash)
		if withPages {
			for line := range strings.Lines(hex.Dump(content)) {
				fmt.Fprint(w, "  ", line)
			}
		}
	}
	return nil
}

func inspectOwn(r io.Reader, rep *inspectReport, text bool, w io.Writer) error {
	data, err := readLimited(r, rep.Key, fence.MaxRecordBytes)
	if err != nil {
		return err
	}
	rec, err := fence.ParseRecord(rep.Key, data)
	if err != nil {
		if text {
			fmt.Fprintf(w, "content: %q\n", data)
		}
		return err
	}
	rep.Own = &rec
	if text {
		state := fmt.Sprintf("held by node %s at %s", rec.Node, rec.Address)
		if rec.Released() {
			state = "released"
		}
		fmt.Fprintf(w, "epoch %d, %s\n", rec.Epoch, state)
	}
	return nil
}

func inspectNode(r io.Reader, rep *inspectReport, text bool, w io.Writer) error {
	data, err := readLimited(r, rep.Key, maxLeaseBytes)
	if err != nil {
		return err
	}
	lease, err := fence.ParseLease(rep.Key, data)
	if err != nil {
		if text {
			fmt.Fprintf(w, "content: %q\n", data)
		}
		return err
	}
	rep.Node = &lease
	if text {
		state := "live or expired (liveness is judged by watching the heartbeat change)"
		if lease.Fenced {
			state = "FENCED by a peer"
		}
		fmt.Fprintf(w, "node %s at %s, heartbeat %d, %s\n", lease.Node, lease.Address, lease.Heartbeat, state)
	}
	return nil
}

// readLimited reads a small object whole, refusing more than max bytes: a
// record (own.json, a lease) larger than any record is damage.
func readLimited(r io.Reader, key string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, frames.Damaged(&bucket.Error{Op: "get", Key: key, Err: fmt.Errorf("%w: more than %d bytes", bucket.ErrTooLarge, max)})
	}
	return data, nil
}
