package compact_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/session"
)

// How a replicator runs compaction: a Trigger follows the batches it
// uploads and, when the size rule is due, one pass runs in the background,
// never two at once, never in the way of a commit. The replicator calls
// Uploaded with the size of each batch object right after its PUT
// succeeded; here the growth of the upload counter stands in for it.
// (a session does exactly this itself; the database here turns it off so that
// the example's own trigger is the only one.)
func Example_replicator() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "compact-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(filepath.Join(tmp, "bucket"), 0o755); err != nil {
		panic(err)
	}
	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}
	id := []byte{0xa1}
	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: "example", Actor: id, Epoch: 1, Dir: filepath.Join(tmp, "db"), DisableCompaction: true})
	if err != nil {
		panic(err)
	}
	actor := frames.Actor{Namespace: frames.NamespaceID("", "example"), Actor: frames.ActorKey(id)}

	// The replicator knows the size of the snapshot that opened its
	// session (pages × page size); 0 works too: the first batch then
	// starts a pass that measures it. The database here is tiny and
	// written in a fraction of a second, so the example turns off the
	// bounds a writer's Trigger otherwise applies (a minimum log of
	// compact.DefaultMinLogBytes, a pass a second at most).
	trigger := compact.Rule{MinLogBytes: -1, MinInterval: -1}.Trigger(0)
	// The writer's passes are its session's owner's: one Owner for all of
	// them (epoch 1, the session's), told of the session's first snapshot
	// when the writer uploads it (Owner.Wrote; package session does).
	opts := compact.Options{ScratchDir: tmp, Owner: compact.NewOwner(1)} // scratch beside the database, not a tmpfs
	var passes sync.WaitGroup
	var snapshots int
	var mu sync.Mutex
	uploaded := func(batchBytes int64) {
		if !trigger.Uploaded(batchBytes) {
			return
		}
		passes.Add(1)
		go func() { // the replicator's own context: cancelled when it closes or is fenced
			defer passes.Done()
			res, err := compact.Actor(ctx, b, actor, opts)
			trigger.Done(res, err)
			if res.Snapshot != "" {
				mu.Lock()
				snapshots++
				mu.Unlock()
			}
		}()
	}

	conn, err := db.Conn()
	if err != nil {
		panic(err)
	}
	var counted int64
	for i := range 40 {
		if err := conn.Exec(fmt.Sprintf("CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES (randomblob(%d))", 500+50*i)); err != nil {
			panic(err)
		}
		if err := db.Durable(ctx); err != nil {
			panic(err)
		}
		up := db.Stats().BytesUploaded
		uploaded(up - counted)
		counted = up
	}
	passes.Wait() // a replicator waits for its pass when it closes
	conn.Close()
	if err := db.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("compacted while writing:", snapshots > 0)
	// Output:
	// compacted while writing: true
}
