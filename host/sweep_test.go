package host

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// The host sweeps stale leases on its schedule: the lease of a dead node
// nobody names goes; the lease of a dead node an own.json still names
// stays (claimants judge it), and so does the host's own.
func TestSweepsStaleLeases(t *testing.T) {
	ctx := t.Context()
	b := buckettest.Dir(t)
	raw := make([]byte, 16)
	rand.Read(raw)
	gone := hex.EncodeToString(raw)
	lease := []byte(`{"node":"` + gone + `","address":"127.0.0.1:9","heartbeat":3,"fenced":false}`)
	_, err := b.Put(ctx, frames.NodeKey(gone), bytesReader(lease), int64(len(lease)), bucket.Condition{})
	require.NoError(t, err)
	holder := writeDeadHolder(t, b, "127.0.0.1:9", "127.0.0.1:9", "ns", "x")
	const age = 2 * (testLease + testGrace)
	time.Sleep(age) // both leases are older than the sweep age now
	h := newHost(t, b, Config{SweepAge: age, SweepEvery: 50 * time.Millisecond})
	if !waitFor(func() bool {
		_, err := b.Stat(ctx, frames.NodeKey(gone))
		return errors.Is(err, bucket.ErrNotFound)
	}) {
		t.Fatal("the stale lease was not swept")
	}
	_, err = b.Stat(ctx, frames.NodeKey(holder))
	assert.NoError(t, err, "the lease of a holder own.json names")
	_, err = b.Stat(ctx, frames.NodeKey(h.Node().ID()))
	assert.NoError(t, err, "the host's own lease")
	assert.NoError(t, h.Node().Valid())
}
