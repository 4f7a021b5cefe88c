package frames_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/framectl/framectl/frames"
)

// Write a batch of two commits to one lane and read it back, as the
// replicator and restore do.
func Example_batch() {
	actor := frames.Actor{Namespace: frames.NamespaceID("", "chat"), Actor: frames.ActorKey([]byte("room-1"))}
	page := bytes.Repeat([]byte{7}, 4096)
	after := frames.Checksum(0).Add(1, page)
	batch := []frames.Frame{
		{Epoch: 1, FirstSeq: 1, LastSeq: 1, Kind: frames.KindInitialize},
		{Epoch: 1, FirstSeq: 2, LastSeq: 3, Kind: frames.KindSQLitePages, SQLite: frames.SQLitePages{
			PageSize: 4096, DatabasePages: 1, Before: 0, After: after,
			Pages: []frames.Page{{Number: 1, Data: page}},
		}},
	}
	var obj bytes.Buffer
	hdr, err := frames.WriteBatch(&obj, 1, batch, frames.WriteOptions{})
	if err != nil {
		panic(err)
	}
	key := actor.LogKey(hdr.Epoch, hdr.LastSeq)
	fmt.Println(key)

	br, err := frames.NewBatchReader(&obj, key, frames.Limits{})
	if err != nil {
		panic(err)
	}
	for {
		f, err := br.Next()
		if err == io.EOF { // only now is the whole object verified
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Println(f.FirstSeq, f.LastSeq, f.Kind)
	}
	// Output:
	// do/Z2AOGpZifMEoHkjkYx4iOQ/726f6f6d2d31/log/fe/03
	// 1 1 initialize
	// 2 3 sqlitePages
}
