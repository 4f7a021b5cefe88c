package compact_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// TestActorManyObjects: a superseded session and the current one of
// 1,100 batches each, 2,200 objects and more, over three listing pages.
// A pass with an hour of retention snapshots the current session through
// its last batch and deletes nothing; a pass two hours later deletes
// every object but that snapshot and own.json: the whole superseded
// session (the tier pass) and every object the snapshot covers
// (retention), across pages; a third deletes every chunk but those the
// snapshot names.
func TestActorManyObjects(t *testing.T) {
	const perSession = 1100
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			dir, id := t.TempDir(), newActorID()
			d := openDBMode(t, b, dir, id, 1, 1024, session.Sync) // one batch per commit
			d.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v INT)")
			for i := range perSession {
				d.exec(fmt.Sprintf("INSERT INTO t(v) VALUES(%d)", i))
			}
			d.close()
			d = openDBMode(t, b, dir, id, 2, 1024, session.Sync)
			for i := range perSession {
				d.exec(fmt.Sprintf("UPDATE t SET v = v + 1 WHERE id = %d", 1+i%perSession))
			}
			last := d.durable()
			image := d.image()
			d.close()
			a := d.actor
			// Chunks are no session's objects: the tier pass and retention
			// never delete them; the collector does, once no snapshot
			// listed names them (a later pass than the one that deleted
			// the last manifest naming them).
			notChunks := func() []string {
				var out []string
				for _, k := range buckettest.Keys(t, b, a.Prefix()) {
					if !strings.HasPrefix(k, a.ChunkPrefix()) {
						out = append(out, k)
					}
				}
				return out
			}
			chunks := func() []string { return buckettest.Keys(t, b, a.ChunkPrefix()) }
			before, chunksBefore := notChunks(), chunks()
			require.Greater(t, len(before), 2*perSession, "objects written")

			opts := testOptions(t)
			opts.Retention = time.Hour
			res := mustCompact(t, b, a, opts)
			require.Equal(t, a.SnapshotKey(2, last), res.Snapshot, "snapshot written")
			require.Empty(t, res.Deleted, "deleted within the retention window")
			require.Equal(t, len(before)+1, len(notChunks()), "objects after the first pass")
			chunksAfter := chunks()
			require.Subset(t, chunksAfter, chunksBefore, "chunks after the first pass")

			opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			res = mustCompact(t, b, a, opts)
			require.Empty(t, res.Snapshot, "a second snapshot of the same frames")
			left := notChunks()
			require.Equal(t, []string{a.OwnKey(), a.SnapshotKey(2, last)}, left[:min(len(left), 5)], "left after the second pass (the first 5 of %d)", len(left))
			require.Equal(t, len(before)-1, len(res.Deleted), "deleted: all but own.json")
			require.Equal(t, chunksAfter, chunks(), "chunks after the second pass: it listed the manifests it deleted")
			res = mustCompact(t, b, a, opts)
			m := buckettest.Manifest(t, b, a.SnapshotKey(2, last))
			var named []string
			for _, c := range m.Lanes[0].Chunks {
				if k := a.ChunkKey(c.Hash); !slices.Contains(named, k) {
					named = append(named, k)
				}
			}
			slices.Sort(named)
			require.Equal(t, named, chunks(), "chunks after the third pass: those the snapshot left names")
			require.Equal(t, len(chunksAfter)-len(named), res.ChunksDeleted, "chunks the third pass deleted")

			dest := filepath.Join(t.TempDir(), "restored.db")
			rr, err := restore.Restore(t.Context(), b, a, dest, restore.Options{})
			require.NoError(t, err)
			require.Equal(t, last, rr.Seq)
			data, err := os.ReadFile(dest)
			require.NoError(t, err)
			dbtest.SameBytes(t, "restored", data, image)
		})
	}
}
