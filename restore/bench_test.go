package restore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/fixture"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// BenchmarkRestore restores the two fixtures of framebench's side-by-side
// restore (internal/fixture), 64 MiB each, uploaded by session.Open as one
// session's first snapshot to a directory bucket: the restore's own CPU,
// without a server beside it. b.SetBytes is the database's size, so MB/s
// are of database restored; sub-benchmarks with and without integrity_check
// show what it costs apart. For profiles:
//
//	go test ./restore -run '^$' -bench Restore -cpuprofile /tmp/restore.prof
func BenchmarkRestore(b *testing.B) {
	for _, kind := range []string{fixture.Incompressible, fixture.Compressible} {
		dir := b.TempDir()
		bk, err := bucket.Open(b.Context(), filepath.Join(dir, "bucket"))
		require.NoError(b, err)
		src := filepath.Join(dir, "src.db")
		require.NoError(b, fixture.Build(src, kind, 64<<20))
		data, err := os.ReadFile(src)
		require.NoError(b, err)
		local := filepath.Join(dir, "local")
		require.NoError(b, os.MkdirAll(local, 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(local, "db.sqlite"), data, 0o644))
		id := []byte("bench-restore")
		db, err := framectl.Open(b.Context(), session.Config{Bucket: bk, Namespace: "bench", Actor: id, Epoch: 1, Dir: local, DisableCompaction: true})
		require.NoError(b, err)
		require.NoError(b, db.Durable(b.Context()))
		require.NoError(b, db.Close(b.Context()))
		actor := frames.Actor{Namespace: frames.NamespaceID("", "bench"), Actor: frames.ActorKey(id)}
		for _, check := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/integrity_check=%v", kind, check), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for i := 0; b.Loop(); i++ {
					out := filepath.Join(b.TempDir(), fmt.Sprintf("out-%d.db", i))
					_, err := restore.Restore(b.Context(), bk, actor, out, restore.Options{SkipIntegrityCheck: !check})
					require.NoError(b, err)
					os.Remove(out)
				}
			})
		}
	}
}
