package chunks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// Example stores a database file as a manifest of chunks, stores it again
// after one page changed (one chunk uploaded), and loads it back.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "chunks-example")
	defer os.RemoveAll(dir)
	b, _ := bucket.Open(ctx, "file://"+filepath.Join(dir, "bucket"))
	a := frames.Actor{Namespace: frames.NamespaceID("", "example"), Actor: frames.ActorKey([]byte("db"))}

	// A 1 MiB database of 4 KiB pages: four chunks.
	path := filepath.Join(dir, "db.sqlite")
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i / 4096)
	}
	os.WriteFile(path, data, 0o644)
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	defer f.Close()
	t, _ := lanes.TrackFile(ctx, f, 4096)
	src := []lanes.Source{{Lane: lanes.MainLane, Kind: frames.LaneSQLitePages, Tracker: t, File: f}}

	w1, err := chunks.Write(ctx, b, a, frames.Manifest{Epoch: 1, Seq: 10}, src, nil, chunks.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("first: %d chunks uploaded, %d skipped\n", w1.Chunks, w1.Skipped)

	page := make([]byte, 4096)
	page[0] = 0xff
	f.WriteAt(page, 0)
	t.Write(1, page)
	w2, err := chunks.Write(ctx, b, a, frames.Manifest{Epoch: 1, Seq: 11}, src, chunks.HaveOf(&w1.Manifest), chunks.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("second: %d chunk uploaded, %d skipped\n", w2.Chunks, w2.Skipped)

	scratch, _ := os.MkdirTemp(dir, "load")
	set, _, err := chunks.Load(ctx, b, a, w2.Key, &w2.Manifest, scratch, chunks.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Close()
	l, _ := set.Lane(lanes.MainLane)
	fmt.Printf("loaded seq %d: %d pages, checksum matches: %v\n", set.Seq(), l.Pages, l.Checksum == t.Checksum())
	// Output:
	// first: 4 chunks uploaded, 0 skipped
	// second: 1 chunk uploaded, 3 skipped
	// loaded seq 11: 256 pages, checksum matches: true
}
