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

// Cut a database into chunks, list them in a manifest, and read it back
// through the chunks it names, as a snapshot writer and restore do. The
// map stands in for the bucket.
func Example_manifest() {
	actor := frames.Actor{Namespace: frames.NamespaceID("", "chat"), Actor: frames.ActorKey([]byte("room-1"))}
	const pageSize = 4096
	db := bytes.Repeat([]byte{7}, 128*pageSize) // 128 equal pages: 2 equal chunks
	sum, pages, _ := frames.DatabaseChecksum(bytes.NewReader(db), pageSize)

	bucket := map[string][]byte{}
	lane := frames.ManifestLane{Kind: frames.LaneSQLitePages, PageSize: pageSize, Pages: pages, Checksum: sum,
		ChunkPages: frames.DefaultChunkPages(pageSize)}
	for first := uint32(1); first <= pages; first += lane.ChunkPages {
		n := min(lane.ChunkPages, pages-first+1)
		var obj bytes.Buffer
		h, stored, err := frames.WriteChunk(&obj, db[(first-1)*pageSize:(first-1+n)*pageSize], frames.WriteOptions{})
		if err != nil {
			panic(err)
		}
		bucket[actor.ChunkKey(h.Hash)] = obj.Bytes() // equal contents: one object
		lane.Chunks = append(lane.Chunks, frames.ChunkRef{FirstPage: first, Pages: n, Hash: h.Hash, StoredSize: stored})
	}
	m := frames.Manifest{Epoch: 2, Seq: 9, Predecessor: frames.Lineage{Epoch: 1, Seq: 9}, Lanes: []frames.ManifestLane{lane}}
	var obj bytes.Buffer
	if err := frames.WriteManifest(&obj, m, frames.WriteOptions{}); err != nil {
		panic(err)
	}
	key := actor.SnapshotKey(m.Epoch, m.Seq)
	bucket[key] = obj.Bytes()

	// A snapshot key holds a full snapshot or a manifest: OpenSnapshot
	// reads either.
	_, got, err := frames.OpenSnapshot(bytes.NewReader(bucket[key]), key, frames.Limits{})
	if err != nil {
		panic(err)
	}
	l := got.Lanes[0]
	var restored []byte
	for _, c := range l.Chunks {
		ck := actor.ChunkKey(c.Hash)
		_, content, err := frames.ReadChunk(bytes.NewReader(bucket[ck]), ck, uint64(c.Pages)*uint64(l.PageSize), nil, frames.Limits{})
		if err != nil {
			panic(err)
		}
		restored = append(restored, content...)
	}
	check, _, _ := frames.DatabaseChecksum(bytes.NewReader(restored), int(l.PageSize))
	fmt.Println(key)
	fmt.Println(len(l.Chunks), "chunks in", len(bucket)-1, "chunk object")
	fmt.Println("continues epoch", got.Predecessor.Epoch, "after seq", got.Predecessor.Seq)
	fmt.Println(bytes.Equal(restored, db), check == l.Checksum)
	// Output:
	// do/Z2AOGpZifMEoHkjkYx4iOQ/726f6f6d2d31/snapshot/fd/f6
	// 2 chunks in 1 chunk object
	// continues epoch 1 after seq 9
	// true true
}
