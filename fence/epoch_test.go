package fence

import (
	"testing"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// A claim opens a session above every session the bucket holds, whatever
// own.json says: lost (absent), or restored from an old copy (lower).
func TestClaimAboveNewestSession(t *testing.T) {
	backends(t, func(t *testing.T, b bucket.Bucket) {
		ctx := t.Context()
		n := register(t, b, "127.0.0.1:9001", newFakeClock())
		actor := func(i int) frames.Actor {
			return frames.Actor{Namespace: testActor.Namespace, Actor: frames.ActorKey([]byte{0xe0, byte(i)})}
		}
		sessions := func(a frames.Actor, logs, snapshots []uint64) {
			for _, s := range logs {
				putTiny(t, b, a.LogKey(frames.Epoch(s), frames.Seq(10*s)))
				putTiny(t, b, a.LogKey(frames.Epoch(s), frames.Seq(10*s+1)))
			}
			for _, s := range snapshots {
				putTiny(t, b, a.SnapshotKey(frames.Epoch(s), frames.Seq(10*s)))
			}
		}
		for i, c := range []struct {
			name            string
			logs, snapshots []uint64
			own             *Record
			junk            []string // keys under the actor that are not sessions
			want            frames.Epoch
		}{
			{name: "no own.json", logs: []uint64{2, 5, 7}, snapshots: []uint64{1, 3, 6}, want: 8},
			{name: "own.json at 3", logs: []uint64{2, 5, 7}, snapshots: []uint64{1, 3, 6}, own: &Record{Epoch: 3}, want: 8},
			{name: "newest is a snapshot", logs: []uint64{4}, snapshots: []uint64{4, 9}, want: 10},
			{name: "own.json newest", logs: []uint64{4}, own: &Record{Epoch: 12}, want: 13},
			{name: "nothing", want: 1},
			// "00" is no descending number: it sorts before every session.
			{name: "junk first", logs: []uint64{7}, snapshots: []uint64{5}, junk: []string{"log/00/1", "log/00/2", "snapshot/00/1"}, want: 8},
		} {
			a := actor(i)
			t.Run(c.name, func(t *testing.T) {
				sessions(a, c.logs, c.snapshots)
				for _, j := range c.junk {
					putTiny(t, b, a.Prefix()+j)
				}
				if c.own != nil {
					putBytes(t, b, a.OwnKey(), c.own.Marshal())
				}
				o, err := n.Claim(ctx, a, ClaimOptions{})
				if err != nil || o.Epoch != c.want {
					t.Fatalf("claimed %+v, %v; want epoch %d", o, err, c.want)
				}
			})
		}
	})
}
