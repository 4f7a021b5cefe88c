package compact

import (
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
