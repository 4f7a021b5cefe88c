package compact

import (
	"time"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// Due is the size rule: a session's log is compacted into a new snapshot
// once the bytes of the log since its newest snapshot reach the database's
// size. It is the rule Cloudflare describes for the storage of Durable
// Objects ("Zero-latency SQLite storage in every Durable Object", Cloudflare
// blog, 2024).
//
//   - logBytes is the stored size of the session's batch objects whose last
//     sequence number is past the newest snapshot's: what a restore has to
//     download on top of the snapshot, compressed, as the bucket lists it.
//   - dbBytes is the uncompressed size of the database at that snapshot:
//     the sum over its lanes of pages × page size, from the snapshot's
//     header.
//
// An empty log is never due, whatever the size (there is nothing to fold
// into a snapshot).
//
// Why the size at the snapshot, and not at the newest commit: it is one fixed
// number for the whole interval, the same for the writer (it knows the size
// of the snapshot that opened its session, and Result reports each new one)
// and for any compactor reading the bucket, whereas the size at the newest
// commit moves with every batch the live writer adds while a pass decides,
// and can only be learned by reading the newest batch. It is also the
// number the rule is about: a restore reads the snapshot plus the log, so
// keeping the log under the snapshot's size keeps a restore's download
// under twice the snapshot (uncompressed), and a compaction's cost is paid
// at most once per database-sized stretch of log, so the bytes the
// compactor writes stay proportional to the bytes the writer uploads. A
// database that grows from nothing is compacted each time it has about
// doubled since its last snapshot: geometrically, so the snapshots written
// while it grows add up to about twice its final size.
//
// Comparing stored (compressed) log bytes with uncompressed database bytes
// is deliberate: the log's cost is what the bucket stores and restore
// downloads, and the database's size is what compaction rebuilds and
// writes; a well-compressing workload may keep a longer log, because it is
// cheaper to read.
func Due(logBytes, dbBytes int64) bool {
	return logBytes > 0 && logBytes >= dbBytes
}

// Rule is the size rule as a writer's Trigger applies it: Due, bounded
// so that it cannot fire on every batch of a small hot database.
//
// Due alone asks for a pass whenever the log reaches the database's size.
// On a small database that a writer rewrites quickly, one batch holds
// about the whole database (a batch keeps the newest version of each page
// it touched), so Due is true after every batch and a pass runs per batch:
// each one re-reads the snapshot and the log and writes a new snapshot, for
// a log that is only ever one batch long. Both bounds below cost the same
// thing, a longer log between snapshots (storage, and what a restore
// reads on top of the snapshot), and BENCHMARKS.md measures it
// ("Compaction on a small hot database").
//
// The zero Rule is the default bounds. framectl compact and Actor apply Due
// as it is: an operator who asks for a pass is not asking too often.
type Rule struct {
	// MinLogBytes: a pass is due only once the log is also at least this
	// many bytes (stored, as Due counts it). It bounds passes per byte
	// uploaded on a database smaller than it, and what that costs in the
	// bucket is at most this much log. 0: DefaultMinLogBytes; negative:
	// none.
	MinLogBytes int64
	// MinInterval: a Trigger starts a pass no sooner than this after the
	// previous one started. It bounds passes per second whatever the
	// upload rate. 0: DefaultMinInterval; negative: none.
	MinInterval time.Duration
}

// The bounds of the zero Rule, chosen by measurement on a 1.1 MB database
// rewritten at random (framebench versus against versitygw; BENCHMARKS.md,
// "Compaction on a small hot database"):
//
//   - at 100 commits/s, the size rule alone ran a pass every 2.7 s and
//     uploaded 8.7 KB per commit, half of it snapshots; with a 4 MiB
//     minimum, a pass every 14 s and 5.3 KB, for 3.4× the database stored
//     on average instead of 1.7× (5.4× at most). 16 MiB would save
//     another 0.8 KB per commit for up to 12× the database stored;
//   - flat out (a batch of about the whole database every few tens of
//     milliseconds), passes ran back to back, 3 to 12 a second, with or
//     without a minimum log; a second between passes cut that to one
//     and the CPU per commit from 60–68 µs to 48–56 µs (36–41 µs without
//     compaction), the log between snapshots then being one second of
//     uploads (19–23× this database, on average).
//
// A database larger than DefaultMinLogBytes that takes more than
// DefaultMinInterval to write its own size is compacted by the size rule
// alone, as before.
const (
	DefaultMinLogBytes = 4 << 20
	DefaultMinInterval = time.Second
)

func (r Rule) withDefaults() Rule {
	if r.MinLogBytes == 0 {
		r.MinLogBytes = DefaultMinLogBytes
	}
	if r.MinInterval == 0 {
		r.MinInterval = DefaultMinInterval
	}
	return r
}

// Due is the size rule with r's minimum log: Due(logBytes, dbBytes), and
// logBytes at least r.MinLogBytes.
func (r Rule) Due(logBytes, dbBytes int64) bool {
	r = r.withDefaults()
	return Due(logBytes, dbBytes) && logBytes >= r.MinLogBytes
}

// sessionLog returns the batches of s after its snapshot base (last seq
// past base's), in order, and the bytes they take in the bucket:
// the log the rule measures.
func sessionLog(s *restore.Session, base restore.Object) ([]restore.Object, int64) {
	var batches []restore.Object
	var size int64
	for _, o := range s.Batches {
		if o.Seq > base.Seq {
			batches = append(batches, o)
			size += o.Size
		}
	}
	return batches, size
}

// dbBytes returns the size of the database a snapshot holds: every lane's
// bytes.
func dbBytes(hdr frames.Snapshot) int64 {
	var n int64
	for _, l := range hdr.Lanes {
		n += int64(l.Bytes)
	}
	return n
}
