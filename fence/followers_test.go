package fence

import (
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/require"
)

var testSet = []string{"f1", "f2", "f3"}

// A claim of a held record carries its follower set into the new record,
// so that a claimant that dies before it took the followers over leaves
// the next claimant the same set to fence; a released record's
// replacement has none.
func TestClaimInheritsFollowers(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		ca, cb, cc := newFakeClock(), newFakeClock(), newFakeClock()
		a := register(t, b, "127.0.0.1:9001", ca)
		bn := register(t, b, "127.0.0.1:9002", cb)
		c := register(t, b, "127.0.0.1:9003", cc)
		oa, err := a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)
		require.Nil(t, oa.Followers, "the first claim's set")
		oa, err = a.RecordFollowers(ctx, oa, testSet, 2)
		require.NoError(t, err)

		// A claims again (a new session of its own): the set stays.
		oa, err = a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)
		require.Equal(t, testSet, oa.Prev.Followers, "Prev of A's second claim")
		require.Equal(t, testSet, oa.Followers, "A's second claim")
		require.Equal(t, 2, oa.Quorum, "A's second claim")
		rec := readRecord(t, b)
		require.Equal(t, testSet, rec.Followers, "own.json after A's second claim: %+v", rec)

		// A dies (its clock stands still: it never renews); B takes over
		// and dies too before it records a set of its own; C takes over
		// from B and finds A's set, the one whose followers hold A's tail.
		_, _, err = bn.Observer.Judge(ctx, a.ID())
		require.NoError(t, err)
		renewFor(t, b, bn, cb, bn.opts.Lease+bn.opts.Grace)
		ob, err := bn.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "B's takeover")
		require.Equal(t, oa.Epoch+1, ob.Epoch, "B's takeover")
		require.Equal(t, a.ID(), ob.Prev.Node, "B's takeover replaced")
		require.Equal(t, testSet, ob.Followers, "B's takeover")
		require.Equal(t, 2, ob.Quorum, "B's takeover")
		_, _, err = c.Observer.Judge(ctx, bn.ID())
		require.NoError(t, err)
		renewFor(t, b, c, cc, c.opts.Lease+c.opts.Grace)
		oc, err := c.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err, "C's takeover")
		require.Equal(t, bn.ID(), oc.Prev.Node, "C's takeover replaced")
		require.Equal(t, testSet, oc.Prev.Followers, "C's takeover replaced")
		want := Record{Epoch: ob.Epoch + 1, Node: c.ID(), Address: "127.0.0.1:9003", Followers: testSet, Quorum: 2}
		require.True(t, want.Equal(readRecord(t, b)), "own.json after C's takeover: %+v, want %+v", readRecord(t, b), want)

		// Released: the set goes (the bucket holds everything), and the
		// next claim has none.
		require.NoError(t, c.Release(ctx, oc, 9))
		require.True(t, Record{Epoch: oc.Epoch, Seq: 9}.Equal(readRecord(t, b)), "own.json after the release: %+v", readRecord(t, b))
		oc, err = c.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)
		require.Nil(t, oc.Followers, "a claim of a released record")
		rec = readRecord(t, b)
		require.Nil(t, rec.Followers, "own.json after a claim of a released record: %+v", rec)
		require.Zero(t, rec.Quorum, "own.json after a claim of a released record: %+v", rec)
	})
}

// RecordFollowers rewrites own.json with the new set and hands back the
// version it wrote: the next RecordFollowers and the Release build on it.
// A set the format refuses is refused before anything is written.
func TestRecordFollowers(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		a := register(t, b, "127.0.0.1:9001", newFakeClock())
		o, err := a.Claim(ctx, testActor, ClaimOptions{Retention: time.Hour})
		require.NoError(t, err)
		base := Record{Epoch: o.Epoch, Node: a.ID(), Address: "127.0.0.1:9001", Retention: time.Hour}

		for _, set := range []struct {
			followers []string
			quorum    int
		}{{testSet, 2}, {[]string{"f4", "f2"}, 1}, {nil, 0}, {[]string{}, 0}, {[]string{"f5", "f6", "f7", "f8", "f9"}, 3}} {
			o, err = a.RecordFollowers(ctx, o, set.followers, set.quorum)
			require.NoError(t, err, "recording %v q=%d", set.followers, set.quorum)
			want := base
			if len(set.followers) > 0 {
				want.Followers, want.Quorum = set.followers, set.quorum
			}
			require.True(t, want.Equal(readRecord(t, b)), "own.json: %+v, want %+v", readRecord(t, b), want)
			require.Equal(t, want.Followers, o.Followers, "Ownership's set")
			require.Equal(t, want.Quorum, o.Quorum, "Ownership's quorum")
		}

		_, before, err := ReadRecord(ctx, b, testActor)
		require.NoError(t, err)
		for _, bad := range []struct {
			followers []string
			quorum    int
		}{
			{nil, 1}, {[]string{}, 1}, {testSet, 0}, {testSet, 4}, {testSet, -1},
			{[]string{"f1", "f1"}, 1}, {[]string{a.ID()}, 1}, {[]string{"F1"}, 1}, {[]string{""}, 1},
			{[]string{"f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8"}, 5},
		} {
			_, err := a.RecordFollowers(ctx, o, bad.followers, bad.quorum)
			require.Error(t, err, "recording %q q=%d", bad.followers, bad.quorum)
			_, info, err := ReadRecord(ctx, b, testActor)
			require.NoError(t, err)
			require.Equal(t, before.ETag, info.ETag, "own.json rewritten by the refused %q q=%d", bad.followers, bad.quorum)
		}

		require.NoError(t, a.Release(ctx, o, 5), "release after RecordFollowers")
		require.True(t, Record{Epoch: o.Epoch, Seq: 5, Retention: time.Hour}.Equal(readRecord(t, b)), "own.json after the release: %+v", readRecord(t, b))
	})
}

// Once another node claimed the actor, a RecordFollowers of the old claim
// fails with ErrFenced and leaves the new owner's record alone; a stale
// version of this node's own claim is refused too, without overwriting
// what own.json holds.
func TestRecordFollowersAfterTakeover(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		ca, cb := newFakeClock(), newFakeClock()
		a := register(t, b, "127.0.0.1:9001", ca)
		bn := register(t, b, "127.0.0.1:9002", cb)
		o1, err := a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)
		o2, err := a.RecordFollowers(ctx, o1, testSet, 2)
		require.NoError(t, err)

		// o1's version is gone: a different set is refused, and it is not
		// the takeover sentinel (A still holds the actor).
		_, err = a.RecordFollowers(ctx, o1, []string{"f9"}, 1)
		require.Error(t, err, "a stale version")
		require.NotErrorIs(t, err, ErrFenced, "a stale version of a claim A still holds")
		require.Equal(t, testSet, readRecord(t, b).Followers, "own.json after the stale write")

		_, _, err = bn.Observer.Judge(ctx, a.ID())
		require.NoError(t, err)
		renewFor(t, b, bn, cb, bn.opts.Lease+bn.opts.Grace)
		ob, err := bn.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)
		taken := readRecord(t, b)

		// A has not renewed since, so it still takes itself for valid:
		// only own.json can tell it the actor is gone.
		require.NoError(t, a.Valid())
		_, err = a.RecordFollowers(ctx, o2, []string{"f4", "f5", "f6"}, 2)
		require.ErrorIs(t, err, ErrFenced, "RecordFollowers after a takeover")
		require.Contains(t, err.Error(), testActor.OwnKey(), "the error names the record")
		require.True(t, taken.Equal(readRecord(t, b)), "own.json after the fenced write: %+v, want %+v", readRecord(t, b), taken)
		require.Equal(t, ob.Epoch, taken.Epoch)
	})
}

// A RecordFollowers whose answer is lost is read back: landed, it counts,
// with the version it wrote (the next write, conditional on it, works);
// not landed, it is an error and own.json is as it was.
func TestRecordFollowersLostResponse(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		a := register(t, b, "127.0.0.1:9001", newFakeClock())
		o, err := a.Claim(ctx, testActor, ClaimOptions{})
		require.NoError(t, err)

		lost := buckettest.NewFaulty(b, buckettest.FaultConfig{LostResponseRate: 1})
		a.b = lost // the fake clock never moves: no renewal runs meanwhile
		o, err = a.RecordFollowers(ctx, o, testSet, 2)
		require.NoError(t, err, "a write that landed, its answer lost")
		require.Equal(t, int64(1), lost.Counts().LostResponses, "lost responses")
		require.Equal(t, testSet, o.Followers)

		failing := buckettest.NewFaulty(b, buckettest.FaultConfig{ErrorRateByOp: map[string]float64{"put": 1}})
		a.b = failing
		_, err = a.RecordFollowers(ctx, o, []string{"f9"}, 1)
		require.ErrorIs(t, err, buckettest.ErrInjected, "a write that never landed")
		require.NotErrorIs(t, err, ErrFenced, "a write that never landed")
		require.Equal(t, testSet, readRecord(t, b).Followers, "own.json after the failed write")

		a.b = b
		o, err = a.RecordFollowers(ctx, o, []string{"f4"}, 1)
		require.NoError(t, err, "a write conditional on the version read back")
		require.Equal(t, []string{"f4"}, readRecord(t, b).Followers)
		require.NoError(t, a.Release(ctx, o, 0))
		require.True(t, readRecord(t, b).Released())
	})
}

// RecordFollowers checks the node's own lease first, as Claim does.
func TestRecordFollowersNeedsAValidNode(t *testing.T) {
	b := buckettest.Dir(t)
	ctx := t.Context()
	a := register(t, b, "127.0.0.1:9001", newFakeClock())
	o, err := a.Claim(ctx, testActor, ClaimOptions{})
	require.NoError(t, err)
	require.NoError(t, a.Close(ctx))
	_, err = a.RecordFollowers(ctx, o, testSet, 2)
	require.ErrorIs(t, err, ErrClosed)
	require.Nil(t, readRecord(t, b).Followers, "own.json after a closed node's write")
}
