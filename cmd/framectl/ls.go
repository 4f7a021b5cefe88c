package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/workers"
	"github.com/framectl/framectl/restore"
)

var lsUsage = usage{forms: []string{"--bucket [--namespace [--tenant] | --namespace-id] [--actor] [--headers] [--json [-v]]"},
	hint: "framectl ls --bucket file:///path/to/bucket --namespace NS", help: `
Lists what a bucket holds. For the whole bucket or a namespace: one line per
actor (sessions, the range of sequence numbers of the newest session,
snapshot and batch counts, bytes) and, for the whole bucket, the node leases.
For one actor: own.json as parsed, then every session with where it
started (the session and sequence number it continued from, as its oldest
manifest records: the lineage restore follows across sessions; one small
read per session), its snapshots and batches, their keys, sizes and
sequence numbers.

A batch's key holds its last sequence number only; --headers reads the header
of every batch and snapshot of the actor to show first sequence numbers,
frame counts, snapshot sizes and, for a snapshot stored as a manifest of
chunks, its chunk count and the session's lineage (the session and sequence
number it continued from), one small read per object. Chunks are counted
per actor: they belong to no session (every manifest that holds the same
pages shares them).

Examples:
  framectl ls --bucket file:///var/lib/framectl/bucket
  framectl ls --bucket 's3://backups/prod?endpoint=minio:9000' --namespace chat
  framectl ls --bucket file:///tmp/b --namespace-id Sx1CEZLQgCtH3lmtBp0oqA --actor 64656d6f --headers
`}

// lsObject is one batch or snapshot.
type lsObject struct {
	Kind    string       `json:"kind"` // "snapshot" or "batch"
	Key     string       `json:"key"`
	Epoch   frames.Epoch `json:"epoch"`
	Seq     frames.Seq   `json:"seq"` // batch: its last sequence number; snapshot: the one it covers through
	Size    int64        `json:"size"`
	ModTime time.Time    `json:"modTime,omitzero"`
	// Filled with --headers:
	FirstSeq      frames.Seq `json:"firstSeq,omitempty"`      // batch
	FrameMessages uint32     `json:"frameMessages,omitempty"` // batch
	DatabaseBytes uint64     `json:"databaseBytes,omitempty"` // snapshot
	CommitTime    *time.Time `json:"commitTime,omitempty"`    // snapshot
	// A snapshot stored as a manifest: the chunks it names (references)
	// and its session's lineage (nil: a new database, or a full snapshot).
	Manifest    bool       `json:"manifest,omitempty"`
	Chunks      int        `json:"chunks,omitempty"`
	Predecessor *lsLineage `json:"predecessor,omitempty"`
	HeaderError string     `json:"headerError,omitempty"`
}

// lsLineage is where a session started: the state of session epoch after
// commit seq.
type lsLineage struct {
	Epoch frames.Epoch `json:"epoch"`
	Seq   frames.Seq   `json:"seq"`
}

type lsSession struct {
	Epoch frames.Epoch `json:"epoch"`
	// Lineage (one actor only) says where the session started, from its
	// oldest manifest: "continues" (Predecessor: the session and the seq
	// it continued from), "new" (a new database), "unrecorded" (only full
	// snapshots, written before manifests), "damaged" (no manifest could
	// be read: LineageError), "" (no snapshot).
	Lineage      string     `json:"lineage,omitempty"`
	Predecessor  *lsLineage `json:"predecessor,omitempty"`
	LineageError string     `json:"lineageError,omitempty"`
	FirstSeq     frames.Seq `json:"firstSeq"` // the oldest snapshot's (0 with none)
	LastSeq      frames.Seq `json:"lastSeq"`  // the newest batch's or snapshot's
	Snapshots    int        `json:"snapshots"`
	Batches      int        `json:"batches"`
	Bytes        int64      `json:"bytes"`
	Objects      []lsObject `json:"objects,omitempty"` // one actor only
}

type lsOwn struct {
	Size    int64         `json:"size"`
	ModTime time.Time     `json:"modTime,omitzero"`
	Record  *fence.Record `json:"record,omitempty"`
	Error   string        `json:"error,omitempty"`
}

type lsActor struct {
	Namespace string      `json:"namespace"`
	Actor     string      `json:"actor"`
	Prefix    string      `json:"prefix"`
	HasOwn    bool        `json:"hasOwn"`
	Own       *lsOwn      `json:"own,omitempty"` // one actor only
	Sessions  []lsSession `json:"sessions"`      // newest first
	// Chunks and ChunkBytes count the actor's chunk objects, shared by
	// its manifests; Objects and Bytes count every object, chunks too.
	Chunks     int   `json:"chunks"`
	ChunkBytes int64 `json:"chunkBytes"`
	Objects    int   `json:"objects"`
	Bytes      int64 `json:"bytes"`
}

type lsNode struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime,omitzero"`
}

type lsReport struct {
	Bucket  string    `json:"bucket"`
	Prefix  string    `json:"prefix"`
	Actors  []lsActor `json:"actors"`
	Nodes   []lsNode  `json:"nodes,omitempty"`
	Unknown []string  `json:"unknown,omitempty"` // keys that are not framectl objects
}

func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newFlags("ls", lsUsage, stdout, stderr)
	url := c.bucketFlag()
	ns := c.namespaceFlags()
	actor := c.fs.String("actor", "", "list one actor's objects: its `HEX` key")
	headers := c.fs.Bool("headers", false, "read every object's header (with --actor): first sequence numbers, frame counts")
	out := c.outputFlags()
	sc, code, ok := c.parseScope(args, ns, actor)
	if !ok {
		return code
	}
	if *headers && sc.actor.Actor == "" {
		return c.usageError("--headers reads every object's header: it needs --actor")
	}
	b, code, ok := c.openBucket(ctx, *url)
	if !ok {
		return code
	}

	rep, err := list(ctx, b, sc)
	if err != nil {
		return c.fail(err)
	}
	if sc.actor.Actor != "" {
		if len(rep.Actors) == 0 {
			return c.fail(sc.notFound(b))
		}
		a := &rep.Actors[0]
		a.Own = readOwn(ctx, b, sc.actor, a.HasOwn)
		if err := readLineages(ctx, b, a); err != nil {
			return c.fail(err)
		}
		if *headers {
			n := 0
			for _, s := range a.Sessions {
				n += len(s.Objects)
			}
			p := newProgress(stderr, out.progress(), "ls: reading headers", int64(n), false)
			if err := readHeaders(ctx, b, a, p); err != nil {
				p.clear()
				return c.fail(err)
			}
			p.finish()
		}
	} else if sc.namespace != "" && len(rep.Actors) == 0 {
		return c.fail(sc.notFound(b))
	}
	if sc.namespace == "" {
		for info, err := range bucket.All(ctx, b, frames.NodesPrefix) {
			if err != nil {
				return c.fail(fmt.Errorf("listing %s: %w", frames.NodesPrefix, err))
			}
			rep.Nodes = append(rep.Nodes, lsNode{Key: info.Key, Size: info.Size, ModTime: info.ModTime})
		}
	}

	if out.json {
		if err := c.emit(rep); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	if sc.actor.Actor != "" {
		printActor(stdout, &rep.Actors[0], *headers)
	} else {
		printActors(stdout, rep)
	}
	return exitOK
}

// list walks prefix once and groups what it finds by actor and session.
func list(ctx context.Context, b bucket.Bucket, sc scope) (*lsReport, error) {
	rep := &lsReport{Bucket: b.String(), Prefix: sc.prefix(), Actors: []lsActor{}}
	sessions := map[frames.Epoch]*lsSession{}
	flush := func() {
		if len(rep.Actors) == 0 {
			return
		}
		a := &rep.Actors[len(rep.Actors)-1]
		for _, s := range sessions {
			a.Sessions = append(a.Sessions, *s)
		}
		slices.SortFunc(a.Sessions, func(x, y lsSession) int { return cmp.Compare(y.Epoch, x.Epoch) })
		clear(sessions)
	}
	detail := sc.actor.Actor != ""
	for info, err := range bucket.All(ctx, b, sc.prefix()) {
		if err != nil {
			return nil, err // a *bucket.Error naming the prefix
		}
		k, err := frames.ParseKey(info.Key)
		if err != nil || k.Kind == frames.KeyNode {
			rep.Unknown = append(rep.Unknown, info.Key)
			continue
		}
		// Keys of one actor are contiguous: its prefix groups them.
		if n := len(rep.Actors); n == 0 || rep.Actors[n-1].Actor != k.Actor || rep.Actors[n-1].Namespace != k.Namespace {
			flush()
			a := k.ActorOf()
			rep.Actors = append(rep.Actors, lsActor{Namespace: a.Namespace, Actor: a.Actor, Prefix: a.Prefix()})
		}
		a := &rep.Actors[len(rep.Actors)-1]
		a.Objects++
		a.Bytes += info.Size
		switch k.Kind {
		case frames.KeyOwn:
			a.HasOwn = true
			continue
		case frames.KeyChunk:
			a.Chunks++
			a.ChunkBytes += info.Size
			continue
		}
		s := sessions[k.Epoch]
		if s == nil {
			s = &lsSession{Epoch: k.Epoch, FirstSeq: k.Seq}
			sessions[k.Epoch] = s
		}
		s.Bytes += info.Size
		s.LastSeq = max(s.LastSeq, k.Seq)
		o := lsObject{Key: info.Key, Epoch: k.Epoch, Seq: k.Seq, Size: info.Size, ModTime: info.ModTime}
		if k.Kind == frames.KeySnapshot {
			if s.Snapshots == 0 || k.Seq < s.FirstSeq {
				s.FirstSeq = k.Seq
			}
			s.Snapshots++
			o.Kind = "snapshot"
		} else {
			if s.Snapshots == 0 {
				s.FirstSeq = 0 // no snapshot: the session's start is unknown
			}
			s.Batches++
			o.Kind = "batch"
		}
		if detail {
			s.Objects = append(s.Objects, o)
		}
	}
	flush()
	for i := range rep.Actors {
		for j := range rep.Actors[i].Sessions {
			s := &rep.Actors[i].Sessions[j]
			// Snapshots list newest first (descending keys), batches
			// oldest first: show them in sequence order, snapshots first.
			slices.SortStableFunc(s.Objects, func(x, y lsObject) int {
				return cmp.Or(cmp.Compare(x.Seq, y.Seq), strings.Compare(y.Kind, x.Kind))
			})
		}
	}
	return rep, nil
}

// readOwn reads and parses own.json.
func readOwn(ctx context.Context, b bucket.Bucket, a frames.Actor, listed bool) *lsOwn {
	if !listed {
		return nil
	}
	r, info, err := fence.ReadRecord(ctx, b, a)
	o := &lsOwn{Size: info.Size, ModTime: info.ModTime}
	if err != nil {
		o.Error = errString(err)
	} else {
		o.Record = &r
	}
	return o
}

// readLineages fills in where each session of an actor started, from its
// oldest snapshot that is a manifest (every manifest of a session records
// the same lineage): one small read per session. A manifest that does not
// decode is passed over for the next; a bucket that does not answer fails.
func readLineages(ctx context.Context, b bucket.Bucket, a *lsActor) error {
	sessions := make([]*lsSession, len(a.Sessions))
	for i := range a.Sessions {
		sessions[i] = &a.Sessions[i]
	}
	return workers.Run(ctx, sessions, headerReaders, func(ctx context.Context, _ *struct{}, s *lsSession) error {
		return readLineage(ctx, b, s)
	})
}

// readLineage fills in where s started, as restore.SessionLineage reads
// it: the lineage a restore follows, from the session's oldest snapshot
// that is a manifest. A snapshot deleted since the listing (compaction) is
// taken out of the list and the rest read again, a manifest that does not
// decode is damage shown on the session, and a bucket that does not
// answer fails ls.
func readLineage(ctx context.Context, b bucket.Bucket, s *lsSession) error {
	rs := &restore.Session{Epoch: s.Epoch}
	for _, o := range s.Objects { // in sequence order: the oldest first
		if o.Kind == "snapshot" {
			rs.Snapshots = append(rs.Snapshots, restore.Object{Key: o.Key, Kind: frames.KeySnapshot, Epoch: o.Epoch, Seq: o.Seq, Size: o.Size, ModTime: o.ModTime})
		}
	}
	for len(rs.Snapshots) > 0 {
		lin, _, known, err := restore.SessionLineage(ctx, b, rs, frames.Limits{})
		var be *bucket.Error
		switch {
		case errors.Is(err, bucket.ErrNotFound) && errors.As(err, &be):
			i := slices.IndexFunc(rs.Snapshots, func(o restore.Object) bool { return o.Key == be.Key })
			if i < 0 {
				return fmt.Errorf("reading the lineage of session %d: %w", s.Epoch, err)
			}
			rs.Snapshots = slices.Delete(rs.Snapshots, i, i+1)
			continue
		case errors.Is(err, frames.ErrDamage):
			s.Lineage, s.LineageError = "damaged", errString(err)
		case err != nil:
			return fmt.Errorf("reading the lineage of session %d: %w", s.Epoch, err)
		case !known:
			s.Lineage = "unrecorded"
		case lin.Epoch == 0:
			s.Lineage = "new"
		default:
			s.Lineage, s.Predecessor = "continues", &lsLineage{Epoch: lin.Epoch, Seq: lin.Seq}
		}
		return nil
	}
	return nil
}

// sessionLineage says in words where a session started.
func sessionLineage(s lsSession) string {
	switch s.Lineage {
	case "continues":
		return fmt.Sprintf("continues session %d from seq %d", s.Predecessor.Epoch, s.Predecessor.Seq)
	case "new":
		return "started a new database"
	case "unrecorded":
		return "lineage not recorded (full snapshots)"
	case "damaged":
		return "lineage unreadable: " + s.LineageError
	}
	return "no snapshot: lineage unknown"
}

// headerReaders is how many object headers ls --headers reads at once.
const headerReaders = 8

// readHeaders fills in what the headers of an actor's objects say. A
// header that does not decode is reported on its object, not as a failure
// of ls; a bucket that does not answer is.
func readHeaders(ctx context.Context, b bucket.Bucket, a *lsActor, p *progress) error {
	var objs []*lsObject
	for i := range a.Sessions {
		for j := range a.Sessions[i].Objects {
			objs = append(objs, &a.Sessions[i].Objects[j])
		}
	}
	return workers.Run(ctx, objs, headerReaders, func(ctx context.Context, _ *struct{}, o *lsObject) error {
		if err := readHeader(ctx, b, o); err != nil {
			return err
		}
		p.add(1)
		return nil
	})
}

func readHeader(ctx context.Context, b bucket.Bucket, o *lsObject) error {
	r, _, err := b.Get(ctx, o.Key)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		o.HeaderError = "deleted since the listing (compaction?)"
		return nil
	case err != nil:
		return err
	}
	defer r.Close()
	if o.Kind == "batch" {
		br, err := frames.NewBatchReader(r, o.Key, frames.Limits{})
		if err != nil {
			return headerFailure(o, err)
		}
		h := br.Header()
		o.FirstSeq, o.FrameMessages = h.FirstSeq, h.FrameCount
		return nil
	}
	sr, m, err := frames.OpenSnapshot(r, o.Key, frames.Limits{})
	if err != nil {
		return headerFailure(o, err)
	}
	var h frames.Snapshot
	if m != nil {
		h = m.Header()
		o.Manifest = true
		for _, l := range m.Lanes {
			o.Chunks += len(l.Chunks)
		}
		if p := m.Predecessor; p.Epoch != 0 {
			o.Predecessor = &lsLineage{Epoch: p.Epoch, Seq: p.Seq}
		}
	} else {
		h = sr.Header()
	}
	for _, l := range h.Lanes {
		o.DatabaseBytes += l.Bytes
	}
	o.CommitTime = unixNanoTime(h.CommitTime)
	return nil
}

// headerFailure records a damaged header; other errors (the network) stop ls.
func headerFailure(o *lsObject, err error) error {
	if errors.Is(err, frames.ErrDamage) {
		o.HeaderError = errString(err)
		return nil
	}
	return fmt.Errorf("reading %s: %w", o.Key, err)
}

func printActors(w io.Writer, rep *lsReport) {
	if len(rep.Actors) == 0 {
		fmt.Fprintf(w, "no actors under %s in %s\n", rep.Prefix, rep.Bucket)
	} else {
		t := newTable(w)
		fmt.Fprintln(t, "NAMESPACE\tACTOR\tOWN\tSESSIONS\tNEWEST\tSEQ\tSNAPSHOTS\tBATCHES\tCHUNKS\tSIZE")
		for _, a := range rep.Actors {
			own := "-"
			if a.HasOwn {
				own = "yes"
			}
			newest, seqs, snaps, batches := "-", "-", 0, 0
			if len(a.Sessions) > 0 {
				s := a.Sessions[0]
				newest = fmt.Sprint(s.Epoch)
				seqs = sessionSeqs(s)
				snaps, batches = s.Snapshots, s.Batches
			}
			fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", a.Namespace, a.Actor, own, len(a.Sessions),
				newest, seqs, snaps, batches, a.Chunks, fmtBytes(a.Bytes))
		}
		t.Flush()
		fmt.Fprintln(w, "(NEWEST: the newest session; SEQ (its sequence numbers), SNAPSHOTS, BATCHES: in it; CHUNKS: the actor's, shared by its manifests)")
	}
	if len(rep.Nodes) > 0 {
		fmt.Fprintln(w)
		t := newTable(w)
		fmt.Fprintln(t, "NODE LEASE\tSIZE\tMODIFIED")
		for _, n := range rep.Nodes {
			fmt.Fprintf(t, "%s\t%d\t%s\n", n.Key, n.Size, fmtTime(n.ModTime))
		}
		t.Flush()
	}
	printUnknown(w, rep.Unknown)
}

func sessionSeqs(s lsSession) string {
	if s.Snapshots == 0 {
		return fmt.Sprintf("?..%d", s.LastSeq)
	}
	return fmt.Sprintf("%d..%d", s.FirstSeq, s.LastSeq)
}

// retentionNote describes a recorded retention window, "" when none.
func retentionNote(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf(", retention %v", d)
}

func printActor(w io.Writer, a *lsActor, headers bool) {
	fmt.Fprintf(w, "actor %s  namespace %s  (%s)\n", a.Actor, a.Namespace, a.Prefix)
	switch o := a.Own; {
	case o == nil:
		fmt.Fprintln(w, "own.json: absent")
	case o.Error != "":
		fmt.Fprintf(w, "own.json: %s\n", o.Error)
	case o.Record.Released():
		end := ""
		if o.Record.Seq > 0 {
			end = fmt.Sprintf(" at seq %d", o.Record.Seq)
		}
		fmt.Fprintf(w, "own.json: epoch %d, released%s%s\n", o.Record.Epoch, end, retentionNote(o.Record.Retention))
	default:
		fmt.Fprintf(w, "own.json: epoch %d, held by node %s at %s%s\n", o.Record.Epoch, o.Record.Node, o.Record.Address, retentionNote(o.Record.Retention))
	}
	fmt.Fprintf(w, "%d objects, %s", a.Objects, fmtBytes(a.Bytes))
	if a.Chunks > 0 {
		fmt.Fprintf(w, " (%d chunks, %s, shared by the manifests)", a.Chunks, fmtBytes(a.ChunkBytes))
	}
	fmt.Fprintln(w)
	for _, s := range a.Sessions {
		fmt.Fprintf(w, "\nsession %d: seq %s, %d snapshots, %d batches, %s; %s\n",
			s.Epoch, sessionSeqs(s), s.Snapshots, s.Batches, fmtBytes(s.Bytes), sessionLineage(s))
		t := newTable(w)
		if headers {
			fmt.Fprintln(t, "  KIND\tSEQ\tSIZE\tMODIFIED\tHEADER\tKEY")
		} else {
			fmt.Fprintln(t, "  KIND\tSEQ\tSIZE\tMODIFIED\tKEY")
		}
		for _, o := range s.Objects {
			seqs := fmt.Sprintf("..%d", o.Seq)
			if o.Kind == "snapshot" {
				seqs = fmt.Sprintf("@%d", o.Seq)
			}
			if !headers {
				fmt.Fprintf(t, "  %s\t%s\t%d\t%s\t%s\n", o.Kind, seqs, o.Size, fmtTime(o.ModTime), o.Key)
				continue
			}
			var hdr string
			switch {
			case o.HeaderError != "":
				hdr = "DAMAGED: " + o.HeaderError
			case o.Kind == "batch":
				seqs = fmt.Sprintf("%d..%d", o.FirstSeq, o.Seq)
				hdr = fmt.Sprintf("%d frame messages", o.FrameMessages)
			case o.Manifest:
				hdr = fmt.Sprintf("database %s, manifest of %d chunks, %s", fmtBytes(int64(o.DatabaseBytes)), o.Chunks, lineageNote(o.Predecessor))
			default:
				hdr = fmt.Sprintf("database %s", fmtBytes(int64(o.DatabaseBytes)))
			}
			fmt.Fprintf(t, "  %s\t%s\t%d\t%s\t%s\t%s\n", o.Kind, seqs, o.Size, fmtTime(o.ModTime), hdr, o.Key)
		}
		t.Flush()
	}
	if !headers {
		fmt.Fprintln(w, "\n(batch keys hold last sequence numbers: --headers reads the first ones)")
	}
}

// lineageNote says where a manifest's session started.
func lineageNote(p *lsLineage) string {
	if p == nil {
		return "session started a new database"
	}
	return fmt.Sprintf("session continued session %d at seq %d", p.Epoch, p.Seq)
}

func printUnknown(w io.Writer, keys []string) {
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d keys that are not framectl objects:\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(w, "  %s\n", k)
	}
}
