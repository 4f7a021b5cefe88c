package restore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/internal/fixture"
	"github.com/framectl/framectl/restore"
)

// BenchmarkIntegrityCheck times IntegrityCheck side by side with the same
// check through go-sqlite3's plain "os" VFS (one pread per page read), as
// it ran before it read ahead (integrityvfs.go), on the restore
// benchmarks' fixtures (internal/fixture), 64 MiB each, laid out in page
// order as restored tables mostly are, and on a table of random keys,
// whose pages SQLite reads scattered: the read-ahead must not cost it.
// b.SetBytes is the database's size. For profiles:
//
//	go test ./restore -run '^$' -bench IntegrityCheck -cpuprofile /tmp/integrity.prof
func BenchmarkIntegrityCheck(b *testing.B) {
	checks := []struct {
		name  string
		check func(context.Context, string) error
	}{
		{"vfs=os", restore.IntegrityCheckOS},
		{"vfs=readahead", restore.IntegrityCheck},
	}
	for _, kind := range []string{fixture.Incompressible, fixture.Compressible, "random-keys"} {
		path := filepath.Join(b.TempDir(), "db.sqlite")
		if kind == "random-keys" {
			randomKeysDB(b, path)
		} else {
			require.NoError(b, fixture.Build(path, kind, 64<<20))
		}
		st, err := os.Stat(path)
		require.NoError(b, err)
		for _, c := range checks {
			b.Run(fmt.Sprintf("%s/%s", kind, c.name), func(b *testing.B) {
				b.SetBytes(st.Size())
				b.ReportAllocs()
				for b.Loop() {
					require.NoError(b, c.check(b.Context(), path))
				}
			})
		}
	}
}

// randomKeysDB writes a database of about 40 MiB whose one table is keyed
// by random blobs, a quarter of them deleted and replaced: its leaves sit
// in the file in no order of their keys.
func randomKeysDB(b *testing.B, path string) {
	c, err := sqlite3.Open("file:" + path + "?vfs=os")
	require.NoError(b, err)
	require.NoError(b, c.Exec(`PRAGMA page_size=4096;
		CREATE TABLE t(k PRIMARY KEY, v) WITHOUT ROWID;
		INSERT INTO t(k, v) SELECT randomblob(16), randomblob(300) FROM generate_series(1, 100000);
		DELETE FROM t WHERE k < x'40';
		INSERT INTO t(k, v) SELECT randomblob(16), randomblob(300) FROM generate_series(1, 30000)`))
	require.NoError(b, c.Close())
}
