package host

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// A dead node's lease that an own.json names is kept by every sweep, and
// judging it reads every own.json in the bucket. The next sweep, with no
// other lease gone stale, reads none (it was 11 here, one per actor, on
// every sweep); a lease that turns stale since makes the sweep a full one
// again, which deletes it.
func TestSweepReadsOwnRecordsOnlyForNewStaleLeases(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			ctx := t.Context()
			raw := be.New(t)
			dead := writeDeadHolder(t, raw, "127.0.0.1:9", "127.0.0.1:9", "ns", "x")
			const released = 10
			for i := range released {
				rec := fence.Record{Epoch: 1}.Marshal()
				_, err := raw.Put(ctx, actorOf("ns", fmt.Sprint("released-", i)).OwnKey(), bytesReader(rec), int64(len(rec)), bucket.Condition{})
				require.NoError(t, err)
			}
			cb := buckettest.NewCounting(raw)
			// Every lease is over an hour old at now.
			const age = time.Hour
			now := time.Now().Add(2 * age)
			var kept sweptKept
			sweepCounted := func() buckettest.Counts {
				t.Helper()
				before := cb.Counts()
				deleted, err := sweep(ctx, cb, &kept, age, now)
				require.NoError(t, err)
				assert.Empty(t, deleted)
				return cb.Counts().Since(before)
			}
			first := sweepCounted()
			assert.Equal(t, int64(released+1), first.Get("get", "own"), "own.json reads of the first sweep: %s", first)
			for i := range 3 {
				again := sweepCounted()
				assert.Equal(t, int64(0), again.Get("get", "own"), "own.json reads of sweep %d: %s", i+2, again)
				assert.Equal(t, int64(1), again.Total(), "requests of sweep %d: %s", i+2, again)
			}
			_, err := raw.Stat(ctx, frames.NodeKey(dead))
			require.NoError(t, err, "the lease of a holder own.json names")

			// A node that died without holding anything: its lease turns
			// stale, and the next sweep deletes it.
			id := make([]byte, 16)
			rand.Read(id)
			gone := hex.EncodeToString(id)
			lease := fence.Lease{Node: gone, Address: "127.0.0.1:8", Heartbeat: 2}.Marshal()
			_, err = raw.Put(ctx, frames.NodeKey(gone), bytesReader(lease), int64(len(lease)), bucket.Condition{})
			require.NoError(t, err)
			deleted, err := sweep(ctx, cb, &kept, age, now)
			require.NoError(t, err)
			assert.Equal(t, []string{frames.NodeKey(gone)}, deleted)
			_, err = raw.Stat(ctx, frames.NodeKey(gone))
			assert.True(t, errors.Is(err, bucket.ErrNotFound), "the unnamed stale lease: %v", err)
			_, err = raw.Stat(ctx, frames.NodeKey(dead))
			require.NoError(t, err, "the lease of a holder own.json names")
			assert.Equal(t, int64(0), sweepCounted().Get("get", "own"), "own.json reads once nothing changed again")
		})
	}
}
