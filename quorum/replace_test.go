package quorum_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/tails"
)

// A follower whose store fills refuses the commits it cannot hold, and the
// owner replaces it with a node that joined the cluster since: own.json
// records the newcomer, which holds every commit, and a takeover after the
// owner and another follower died recovers all of them from the new set.
func TestFullFollowerReplaced(t *testing.T) {
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	key := clusterKey(t)
	owner, f1, f2 := startNode(t, b, key), startNode(t, b, key), startNode(t, b, key)
	full := startNodeWith(t, b, key, nodeOptions{store: tails.Config{MaxBytes: 16 << 10}})
	db, sess := openSession(t, owner, b, t.TempDir())
	require.ElementsMatch(t, []string{f1.store.ID(), f2.store.ID(), full.store.ID()}, followersOf(t, b))
	spare := startNode(t, b, key)

	c, err := db.Conn()
	require.NoError(t, err)
	n := writeUntilReplaced(t, db, c, b, full.id(), spare.id())
	require.Positive(t, full.hub.Stats().StoreErrors, "the full store refused")
	require.Equal(t, int64(1), owner.hub.Stats().Replaced)
	caughtUp(t, sess, spare, n+1)
	st := db.Stats()
	require.Equal(t, int64(n+1), st.AckedByPeers, "two of three followers acknowledged all along")
	require.Zero(t, st.AckedByBucket)

	owner.kill()
	f1.kill()
	requireTakeover(t, full, b, n) // full is outside the set now: f2 and spare answer
	_ = c.Close()
}

// A follower whose node dies (its lease gone) is replaced by a live node
// outside the set, and the session still releases its claim at Close:
// the release matches the version of own.json the replacement wrote.
func TestDeadFollowerReplaced(t *testing.T) {
	b, err := bucket.NewDir(t.TempDir())
	require.NoError(t, err)
	key := clusterKey(t)
	owner := startNode(t, b, key)
	others := []*node{startNode(t, b, key), startNode(t, b, key), startNode(t, b, key), startNode(t, b, key)}
	db, sess := openSession(t, owner, b, t.TempDir())
	set := followersOf(t, b)
	require.Len(t, set, 3)
	var members []*node
	var spare *node
	for _, n := range others {
		if slices.Contains(set, n.store.ID()) {
			members = append(members, n)
		} else {
			spare = n
		}
	}
	c, err := db.Conn()
	require.NoError(t, err)
	require.NoError(t, c.Exec("CREATE TABLE t(i INTEGER, pad BLOB)"))
	require.NoError(t, db.Durable(context.Background()))
	members[0].kill()

	n := writeUntilReplaced(t, db, c, b, members[0].id(), spare.id())
	require.Equal(t, int64(1), owner.hub.Stats().Replaced)
	caughtUp(t, sess, spare, n+1)

	require.NoError(t, c.Close())
	require.NoError(t, db.Close(context.Background()))
	rec, _, err := fence.ReadRecord(context.Background(), b, testActor)
	require.NoError(t, err)
	require.True(t, rec.Released(), "own.json released: %+v", rec)
	require.Equal(t, seq(n), restoredRows(t, b))
}

// followersOf reads the set own.json records.
func followersOf(t *testing.T, b bucket.Bucket) []string {
	t.Helper()
	rec, _, err := fence.ReadRecord(context.Background(), b, testActor)
	require.NoError(t, err)
	return rec.Followers
}

// writeUntilReplaced writes rows with Durable (creating the table first if
// it is missing) until own.json names in instead of out, then ten more,
// and returns how many rows it wrote.
func writeUntilReplaced(t *testing.T, db *framectl.DB, c *sqlite3.Conn, b bucket.Bucket, out, in follow.FollowerID) int {
	t.Helper()
	require.NoError(t, c.Exec("CREATE TABLE IF NOT EXISTS t(i INTEGER, pad BLOB)"))
	require.NoError(t, db.Durable(context.Background()))
	deadline := time.Now().Add(30 * time.Second)
	n := 0
	for {
		set := followersOf(t, b)
		if slices.Contains(set, string(in)) {
			require.NotContains(t, set, string(out))
			break
		}
		require.True(t, time.Now().Before(deadline), "own.json still names %v", set)
		insertPadded(t, db, c, n)
		n++
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 {
		insertPadded(t, db, c, n)
		n++
	}
	return n
}

// insertPadded inserts row i with 2 KB of incompressible padding, so that
// the followers' logs grow fast.
func insertPadded(t *testing.T, db *framectl.DB, c *sqlite3.Conn, i int) {
	t.Helper()
	require.NoError(t, c.Exec(fmt.Sprintf("INSERT INTO t(i, pad) VALUES (%d, randomblob(2000))", i)))
	require.NoError(t, db.Durable(context.Background()))
}

// caughtUp waits until the session's owner knows that in holds the log
// through seq, and checks in's store holds it.
func caughtUp(t *testing.T, sess *quorum.Session, in *node, seq int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := sess.Stats()
		i := slices.IndexFunc(st.Followers, func(f follow.FollowerStatus) bool { return f.ID == in.id() })
		if i >= 0 && st.Followers[i].Member && int(st.Followers[i].Matched) >= seq {
			for _, f := range st.Followers {
				require.NoError(t, f.Failed, "follower %s", f.ID)
			}
			break
		}
		require.True(t, time.Now().Before(deadline), "the newcomer did not catch up: %+v", st)
		time.Sleep(20 * time.Millisecond)
	}
	held, err := in.store.Load(quorum.ActorName(testActor))
	require.NoError(t, err)
	require.GreaterOrEqual(t, int(held.End().Seq), seq, "the newcomer's store holds the log")
}

// requireTakeover opens the actor on by and checks it holds rows 0..n-1,
// in order, once: the tail recovered from the followers.
func requireTakeover(t *testing.T, by *node, b bucket.Bucket, n int) {
	t.Helper()
	db, _ := openSession(t, by, b, t.TempDir())
	c, err := db.Conn()
	require.NoError(t, err)
	require.Equal(t, seq(n), rows(t, c), "every acknowledged commit recovered, in order, once")
	require.Equal(t, int64(1), by.hub.Stats().TailsRecovered)
	require.NoError(t, c.Close())
	require.NoError(t, db.Close(context.Background()))
}

// With more than n-q followers dead and nobody to replace them with, the
// session stops counting on them: Acked reports no quorum, so a Durable
// asks the bucket at once rather than wait PeerWait for followers that
// cannot answer, and every commit is still acknowledged.
func TestUnreachableFollowersLeaveItToTheBucket(t *testing.T) {
	b, ns := fourNodes(t)
	db, sess := openSession(t, ns[0], b, t.TempDir())
	c := writeRows(t, db, 5)
	_, _, quorumOK := sess.Acked()
	require.True(t, quorumOK)
	ns[1].kill()
	ns[2].kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, _, quorumOK = sess.Acked(); !quorumOK {
			break
		}
		require.True(t, time.Now().Before(deadline), "two of three followers dead, and Acked still offers a quorum")
		time.Sleep(20 * time.Millisecond)
	}
	before := db.Stats().AckedByBucket
	insert(t, db, c, 5)
	require.Equal(t, before+1, db.Stats().AckedByBucket)
	require.Equal(t, seq(6), rows(t, c))
	require.NoError(t, c.Close())
	require.NoError(t, db.Close(context.Background()))
	require.Equal(t, seq(6), restoredRows(t, b))
}
