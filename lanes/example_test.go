package lanes_test

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// Apply a log to an empty Set and read the database it leads to, as restore
// does. Frames already applied are skipped; a missing frame is a gap.
func Example() {
	dir, err := os.MkdirTemp("", "lanes-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	set, err := lanes.NewSet(dir)
	if err != nil {
		panic(err)
	}
	defer set.Close()

	page1 := bytes.Repeat([]byte{1}, 4096)
	page2 := bytes.Repeat([]byte{2}, 4096)
	afterTwo := frames.Checksum(0).Add(1, page1).Add(2, page2)
	log := []frames.Frame{
		{Epoch: 1, FirstSeq: 1, LastSeq: 1, Lane: lanes.MainLane, Kind: frames.KindInitialize},
		{Epoch: 1, FirstSeq: 2, LastSeq: 4, Lane: lanes.MainLane, CommitTime: 1_700_000_000e9, Kind: frames.KindSQLitePages,
			SQLite: frames.SQLitePages{PageSize: 4096, DatabasePages: 2, Before: 0, After: afterTwo,
				Pages: []frames.Page{{Number: 1, Data: page1}, {Number: 2, Data: page2}}}},
	}
	for i := range log {
		if err := set.Apply(&log[i]); err != nil {
			panic(err)
		}
	}
	if err := set.Apply(&log[1]); err != nil { // covered: skipped
		panic(err)
	}
	db, _ := set.Lane(lanes.MainLane)
	fmt.Println("seq", set.Seq(), "pages", db.Pages, "bytes", db.Bytes(), "checksum ok", db.Checksum == afterTwo)

	late := frames.Frame{Epoch: 1, FirstSeq: 7, LastSeq: 7, Kind: frames.KindInitialize}
	fmt.Println(set.Apply(&late))
	fmt.Println(set.VerifyFiles(context.Background()))
	// Output:
	// seq 4 pages 2 bytes 8192 checksum ok true
	// lanes: apply: frame 7..7: sequence numbers 5..6 are missing
	// <nil>
}
