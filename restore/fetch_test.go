package restore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// A batch larger than its listed size is damage (frames.ErrDamage): the
// bucket does not hold the object it listed. bucket.ErrTooLarge alone is
// not, so the fetcher, which knows the limit is the listed size, says so.
// Stream 0 is not the head until the replay opens it, so it is downloaded
// whole, through bucket.ReadAll and its limit.
func TestFetchLargerThanListedIsDamage(t *testing.T) {
	b := buckettest.Dir(t)
	a := frames.Actor{Namespace: frames.NamespaceID("", "fetch"), Actor: frames.ActorKey([]byte{1})}
	key := a.LogKey(1, 3)
	body := []byte("a batch longer than its listing says")
	if _, err := b.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), bucket.Condition{}); err != nil {
		t.Fatal(err)
	}
	f := newFetcher(t.Context(), b, []Object{{Key: key, Kind: frames.KeyLog, Epoch: 1, Seq: 3, Size: int64(len(body)) - 1}},
		Options{}.withDefaults())
	defer f.close()
	it := <-f.streams[0].items
	if !errors.Is(it.err, frames.ErrDamage) || !errors.Is(it.err, bucket.ErrTooLarge) {
		t.Fatalf("got %v, want an error matching frames.ErrDamage and bucket.ErrTooLarge", it.err)
	}
	msg := (&Error{Op: "replay", Key: key, Err: it.err}).Error()
	if n := strings.Count(msg, key); n != 1 {
		t.Errorf("%q names %s %d times, want once", msg, key, n)
	}
}
