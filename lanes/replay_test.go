package lanes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/framectl/framectl/frames"
	"github.com/stretchr/testify/require"
)

var testActor = frames.Actor{Namespace: frames.NamespaceID("", "lanes-test"), Actor: frames.ActorKey([]byte("actor"))}

// batch encodes frames as a batch with small parts, so that page-carrying
// frames arrive continued, and returns it with its key.
func batch(t testing.TB, fs []frames.Frame) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	hdr, err := frames.WriteBatch(&buf, fs[0].Epoch, fs, frames.WriteOptions{MaxPartBytes: 3 * 1024})
	require.NoError(t, err)
	return buf.Bytes(), testActor.LogKey(hdr.Epoch, hdr.LastSeq)
}

func replay(t testing.TB, s *Set, data []byte, key string) error {
	t.Helper()
	br, err := frames.NewBatchReader(bytes.NewReader(data), key, frames.Limits{})
	if err != nil {
		return err
	}
	return s.ReplayBatch(t.Context(), br, key)
}

func TestReplayBatch(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := newGen(seed)
			s := newTestSet(t)
			var batches [][]byte
			var keys []string
			for len(batches) < 15 {
				var fs []frames.Frame
				for n := 1 + g.rng.IntN(12); len(fs) < n; {
					fs = append(fs, g.next())
				}
				data, key := batch(t, fs)
				require.NoError(t, replay(t, s, data, key))
				batches, keys = append(batches, data), append(keys, key)
			}
			checkSet(t, s, g.m)
			if s.Stats().Frames <= s.Stats().Overlapping {
				t.Fatalf("stats %+v", s.Stats())
			}
			// Every batch again: all covered.
			for i := range batches {
				require.NoError(t, replay(t, s, batches[i], keys[i]))
			}
			checkSet(t, s, g.m)
		})
	}
}

// A wider batch covering frames the Set has is applied over them, as
// restore does when a later batch merged a range it partly replayed.
func TestReplayWiderBatch(t *testing.T) {
	h := newHistory(5, 30)
	s := newTestSet(t)
	a, key := batch(t, h.frames[:8])
	require.NoError(t, replay(t, s, a, key))
	wide, key := batch(t, []frames.Frame{h.frames[0], h.merged(2, 20)})
	require.NoError(t, replay(t, s, wide, key))
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: h.states[20]}, seq: 20, time: h.frames[19].CommitTime})
	rest, key := batch(t, h.frames[20:])
	require.NoError(t, replay(t, s, rest, key))
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: h.states[30]}, seq: 30, time: h.frames[29].CommitTime})
	st := s.Stats()
	require.Equal(t, uint64(1), st.Overlapping, "stats %+v", st)
}

func TestReplayGap(t *testing.T) {
	h := newHistory(6, 12)
	s := newTestSet(t)
	a, key := batch(t, h.frames[:4])
	require.NoError(t, replay(t, s, a, key))
	c, ckey := batch(t, h.frames[7:])
	err := replay(t, s, c, ckey)
	wantErr(t, err, ErrGap)
	var gap *GapError
	var e *Error
	if !errors.As(err, &gap) || gap.From != 5 || gap.To != 7 || !errors.As(err, &e) || e.Key != ckey {
		t.Fatalf("error %v: want frames 5..7 missing before %s", err, ckey)
	}
	// Nothing was applied: the Set carries on.
	b, key := batch(t, h.frames[4:7])
	for _, obj := range []struct {
		data []byte
		key  string
	}{{b, key}, {c, ckey}} {
		require.NoError(t, replay(t, s, obj.data, obj.key))
	}
	checkSet(t, s, &model{lanes: map[uint32]*modelLane{0: h.states[12]}, seq: 12, time: h.frames[11].CommitTime})
}

// A damaged batch fails replay with an error naming it; a Set that applied
// some of its frames before the damage showed is unusable.
func TestReplayDamaged(t *testing.T) {
	h := newHistory(8, 16)
	data, key := batch(t, h.frames)
	positions := []int{10, len(data) / 4, len(data) / 2, 3 * len(data) / 4, len(data) - 40, len(data) - 1}
	for _, at := range positions {
		t.Run(fmt.Sprintf("byte=%d", at), func(t *testing.T) {
			bad := bytes.Clone(data)
			bad[at] ^= 0x01
			s := newTestSet(t)
			err := replay(t, s, bad, key)
			require.Error(t, err, "damaged batch replayed")
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("error %q does not name %s", err, key)
			}
			if at == len(data)-1 && s.Seq() == 0 {
				t.Fatal("damage in the seal should show only after every frame applied")
			}
			if s.Seq() > 0 {
				wantErr(t, s.Err(), ErrBroken)
				f := h.frames[0]
				wantErr(t, s.Apply(&f), ErrBroken)
			}
		})
	}
}

func TestReplayCancelled(t *testing.T) {
	h := newHistory(9, 10)
	data, key := batch(t, h.frames)
	br, err := frames.NewBatchReader(bytes.NewReader(data), key, frames.Limits{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := newTestSet(t)
	err = s.ReplayBatch(ctx, br, key)
	if !errors.Is(err, ctx.Err()) || s.Err() != nil {
		t.Fatalf("error %v, set %v: want cancelled before any change", err, s.Err())
	}
}
