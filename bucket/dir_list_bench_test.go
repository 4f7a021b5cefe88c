package bucket_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/framectl/framectl/bucket"
)

// BenchmarkDirList: one page of 1,000 keys from a prefix holding 100,000,
// from its start and from its middle (startAfter), and every page of it
// (from=all, bucket.All: what restore and verify do), with the keys in one
// directory (as content-addressed objects are) or in 100 directories of
// 1,000 (as sessions' batches are). dir=unchanged: nothing changes (the
// later pages of a listing find their place in the names its first page
// read; a listing's first page always reads its directories);
// dir=changing: a name is added or removed in every directory just
// before each page, which must then read the directories it walks
// through again.
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
		var dirs []string
		for i := range keys {
			path := filepath.Join(root, filepath.FromSlash(l.key(i)))
			if i%1000 == 0 {
				dirs = append(dirs, filepath.Dir(path))
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
		for _, state := range []string{"unchanged", "changing"} {
			for _, from := range []struct {
				name, after string
			}{{"start", ""}, {"middle", l.key(keys / 2)}, {"all", ""}} {
				b.Run(fmt.Sprintf("layout=%s/keys=%d/dir=%s/from=%s", l.name, keys, state, from.name), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if state == "changing" {
							b.StopTimer()
							for _, dir := range dirs {
								touchDir(b, dir)
							}
							b.StartTimer()
						}
						if from.name == "all" {
							listAllKeys(b, d, keys)
							continue
						}
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
}

// listAllKeys lists every key under p/k/ through bucket.All.
func listAllKeys(b *testing.B, d *bucket.Dir, want int) {
	n := 0
	for _, err := range bucket.All(b.Context(), d, "p/k/") {
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n != want {
		b.Fatalf("listed %d keys, want %d", n, want)
	}
}

// touchDir changes a directory: a name added and removed.
func touchDir(b *testing.B, dir string) {
	name := filepath.Join(dir, "~touch")
	if err := os.WriteFile(name, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(name); err != nil {
		b.Fatal(err)
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
