package bucket_test

import (
	"bytes"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/framectl/framectl/bucket"
)

// BenchmarkDirPut: puts of 1 KiB from 8 goroutines (4 per core), each to
// a key of its own in one directory or all to one key, on the test's
// temporary directory (disk: fsync dominates) and on tmpfs where it exists
// (the cost of the locks shows).
func BenchmarkDirPut(b *testing.B) {
	roots := map[string]string{"disk": b.TempDir()}
	if shm, err := os.MkdirTemp("/dev/shm", "framectl-bench-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(shm) })
		roots["tmpfs"] = shm
	}
	body := bytes.Repeat([]byte("x"), 1024)
	for _, fs := range []string{"disk", "tmpfs"} {
		root, ok := roots[fs]
		if !ok {
			continue
		}
		for _, keys := range []string{"distinct", "one"} {
			b.Run(fmt.Sprintf("fs=%s/keys=%s", fs, keys), func(b *testing.B) {
				d, err := bucket.NewDir(root)
				if err != nil {
					b.Fatal(err)
				}
				var ids atomic.Int64
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					key := "bench/one"
					if keys == "distinct" {
						key = fmt.Sprintf("bench/%d", ids.Add(1))
					}
					for pb.Next() {
						if _, err := d.Put(b.Context(), key, bytes.NewReader(body), int64(len(body)), bucket.Condition{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
