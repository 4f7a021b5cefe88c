package restore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
)

// Replicate a database to a directory bucket, then restore it elsewhere
// and verify the bucket, as an operator does with framectl restore and
// framectl verify.
func Example() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "restore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}

	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: "chat", Actor: []byte("room-1"), Epoch: 1, Dir: filepath.Join(tmp, "live")})
	if err != nil {
		panic(err)
	}
	c, err := db.Conn()
	if err != nil {
		panic(err)
	}
	if err := c.Exec("CREATE TABLE msg(text); INSERT INTO msg VALUES('hello')"); err != nil {
		panic(err)
	}
	c.Close()
	if err := db.Close(ctx); err != nil { // uploads everything
		panic(err)
	}

	actor := frames.Actor{Namespace: frames.NamespaceID("", "chat"), Actor: frames.ActorKey([]byte("room-1"))}
	res, err := restore.Restore(ctx, b, actor, filepath.Join(tmp, "restored.db"), restore.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("session", res.Epoch, "seq", res.Seq)

	rep, err := restore.Verify(ctx, b, actor, restore.VerifyOptions{ScratchDir: tmp})
	if err != nil {
		panic(err)
	}
	fmt.Println("damaged:", rep.Damaged())
	for _, p := range rep.Problems {
		fmt.Println(p.Severity, p.Kind)
	}
	// Output:
	// session 1 seq 2
	// damaged: false
}

// A target past what the bucket holds is an error naming the range, not
// another state restored in its place; OrNearest restores the nearest
// state instead and says so.
func ExampleTarget_OrNearest() {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "restore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}
	db, err := framectl.Open(ctx, session.Config{Bucket: b, Namespace: "chat", Actor: []byte("room-1"), Epoch: 1, Dir: filepath.Join(tmp, "live")})
	if err != nil {
		panic(err)
	}
	c, err := db.Conn()
	if err != nil {
		panic(err)
	}
	if err := c.Exec("CREATE TABLE msg(text); INSERT INTO msg VALUES('hello')"); err != nil {
		panic(err)
	}
	c.Close()
	if err := db.Close(ctx); err != nil {
		panic(err)
	}
	actor := frames.Actor{Namespace: frames.NamespaceID("", "chat"), Actor: frames.ActorKey([]byte("room-1"))}
	dest := filepath.Join(tmp, "restored.db")

	_, err = restore.Restore(ctx, b, actor, dest, restore.Options{Target: restore.ToSeq(99)})
	var te *restore.TargetError
	if errors.As(err, &te) {
		fmt.Printf("seq 99: out of range: session %d holds seq %d..%d\n", te.Epoch, te.FirstSeq, te.LastSeq)
	}
	res, err := restore.Restore(ctx, b, actor, dest, restore.Options{Target: restore.ToSeq(99).OrNearest()})
	if err != nil {
		panic(err)
	}
	fmt.Println("restored seq", res.Seq, "instead of", res.OutOfRange.Target)
	// Output:
	// seq 99: out of range: session 1 holds seq 0..2
	// restored seq 2 instead of seq 99 or the nearest
}
