package bucket_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/bucket"
)

// BenchmarkDirList: one page of 1,000 keys from a prefix holding 100,000,
// from its start and from its middle (startAfter), with the keys in one
// directory (as content-addressed objects are) or in 100 directories of
// 1,000 (as sessions' batches are).
func BenchmarkDirList(b *testing.B) {
	const keys, page = 100_000, 1000
	layouts := []struct {
		name string
		key  func(i int) string
	}{
		{"flat", func(i int) string { return fmt.Sprintf("p/k/%06d", i) }},
		{"nested", func(i int) string { return fmt.Sprintf("p/k/%03d/%06d", i/1000, i) }},
	}
	for _, l := range layouts {
		root := benchRoot(b)
		for i := range keys {
			path := filepath.Join(root, filepath.FromSlash(l.key(i)))
			if i%1000 == 0 {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		d, err := bucket.NewDir(root)
		if err != nil {
			b.Fatal(err)
		}
		for _, from := range []struct {
			name, after string
		}{{"start", ""}, {"middle", l.key(keys / 2)}} {
			b.Run(fmt.Sprintf("layout=%s/keys=%d/from=%s", l.name, keys, from.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p, err := d.List(b.Context(), "p/k/", from.after, page)
					if err != nil {
						b.Fatal(err)
					}
					if len(p.Objects) != page || !p.More {
						b.Fatalf("%d keys, More %v", len(p.Objects), p.More)
					}
				}
			})
		}
	}
}

// benchRoot is a directory for a benchmark's fixture: on tmpfs where there
// is one (a listing reads cached directories either way; a hundred
// thousand files are written there in a fraction of the time), else in
// the test's temporary directory.
func benchRoot(b *testing.B) string {
	if root, err := os.MkdirTemp("/dev/shm", "framectl-bench-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(root) })
		return root
	}
	return b.TempDir()
}
