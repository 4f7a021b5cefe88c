package restore

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
)

// replayCurrent replays the current session from its oldest snapshot to
// its end, recording the state at every frame boundary. Where the replay
// stops (damage, a gap), it starts again from the next snapshot past that
// point, so that every stretch of the session a snapshot can reach is
// replayed once.
func (v *verifier) replayCurrent(ctx context.Context, s *Session) error {
	var (
		lastKey string
		pending = map[frames.Seq][]lanes.Lane{} // states inside the batch being read, trusted once it verifies
	)
	hooks := &replayHooks{
		hashChunks: true,
		onFrame:    func(set *lanes.Set) { pending[set.Seq()] = set.Lanes() },
		onObject: func(o Object, hdr *frames.BatchHeader) {
			maps.Copy(v.chain, pending)
			clear(pending)
			v.mu.Lock()
			v.verified[o.Key] = true
			if hdr != nil {
				v.batchHdr[o.Key] = *hdr
			}
			v.rep.Objects++
			v.rep.Bytes += o.Size
			v.mu.Unlock()
			lastKey = o.Key
			if v.progress != nil {
				v.progress(Progress{Actor: v.a, Phase: PhaseVerify, Key: o.Key})
			}
		},
		onManifest: func(key string, m *frames.Manifest, loaded chunks.Loaded) {
			// Loaded whole: the manifest and every chunk it names verified.
			v.mu.Lock()
			v.manifests[key] = m
			v.rep.Objects += loaded.Chunks
			v.rep.Bytes += loaded.Bytes
			for _, l := range m.Lanes {
				for _, c := range l.Chunks {
					v.chunkOK[chunkUse{key: v.a.ChunkKey(c.Hash), size: uint64(c.Pages) * uint64(l.PageSize)}] = true
				}
			}
			v.mu.Unlock()
		},
	}
	for k := 0; k < len(s.Snapshots); {
		snap := s.Snapshots[k]
		plan := Plan{Actor: v.a, Epoch: s.Epoch, Target: Latest(), Snapshot: snap}
		for _, o := range s.Batches {
			if o.Seq > snap.Seq {
				plan.Batches = append(plan.Batches, o)
			}
		}
		lastKey = snap.Key
		clear(pending)
		rep, err := replay(ctx, v.b, plan, v.scratch, v.opts, hooks)
		if err == nil {
			v.rep.Seq = rep.Seq
			v.chain[rep.Seq] = rep.Set.Lanes()
			return rep.Close()
		}
		kind, sev := classify(err)
		if sev == 0 {
			return err // I/O, a vanished object, ctx
		}
		next := snap.Seq + 1
		var e *Error
		errors.As(err, &e)
		var gap *lanes.GapError
		var ce *chunks.Error
		switch {
		case errors.As(err, &gap):
			next = gap.To // findGaps reports it
		case errors.As(err, &ce) && ce.Chunk != "":
			// A chunk of the manifest: the chunk is the damaged object.
			v.chunkDamage(ctx, ce.Chunk, []string{ce.Manifest}, err)
		case e != nil && e.Key != "":
			v.add(Problem{Key: e.Key, Kind: kind, Severity: Damage, Epoch: s.Epoch, Message: v.describe(ctx, e.Key, err)})
			if k, err := frames.ParseKey(e.Key); err == nil && k.Kind == frames.KeyLog {
				next = k.Seq
			}
		default:
			// The files or integrity_check: the whole replay is at fault;
			// name the newest object it applied.
			v.add(Problem{Key: lastKey, Kind: kind, Severity: Damage, Epoch: s.Epoch,
				Message: fmt.Sprintf("the state replayed from %s through %s: %s", snap.Key, lastKey, cause(err))})
			return nil
		}
		k++
		for k < len(s.Snapshots) && s.Snapshots[k].Seq < next {
			k++
		}
	}
	return nil
}

// findGaps looks for missing frames after each snapshot of s, from the
// batch headers. A damaged batch counts as present through its last seq:
// its damage is reported, and the frames it holds are not missing, only
// unreadable.
func (v *verifier) findGaps(s *Session, sev Severity) {
	type gapKey struct {
		key      string
		from, to frames.Seq
	}
	seen := map[gapKey]bool{}
	for _, snap := range s.Snapshots {
		if v.damaged(snap.Key) {
			continue
		}
		reached := snap.Seq
		for i, o := range s.Batches {
			if o.Seq <= reached {
				continue
			}
			hdr, ok := v.batchHdr[o.Key]
			if !ok { // damaged, or vanished
				reached = o.Seq
				continue
			}
			if hdr.FirstSeq <= reached+1 {
				reached = o.Seq
				continue
			}
			covered := false
			for _, later := range s.Batches[i+1:] {
				h, ok := v.batchHdr[later.Key]
				if !ok || h.FirstSeq <= reached+1 {
					covered = true
					break
				}
			}
			if covered {
				continue
			}
			g := gapKey{o.Key, reached + 1, hdr.FirstSeq - 1}
			if !seen[g] {
				seen[g] = true
				sv, msg := sev, fmt.Sprintf("sequence numbers %d..%d are missing before this batch (after snapshot %s)", g.from, g.to, snap.Key)
				if sv == Damage {
					for _, later := range s.Snapshots {
						if later.Seq >= g.to && !v.damaged(later.Key) {
							sv, msg = Warning, msg+fmt.Sprintf("; snapshot %s covers them, so only a point-in-time restore between is impossible", later.Key)
							break
						}
					}
				}
				v.add(Problem{Key: o.Key, Kind: KindGap, Severity: sv, Epoch: s.Epoch, From: g.from, To: g.to, Message: msg})
			}
			reached = o.Seq
		}
	}
}

// checkSnapshots compares every snapshot of the current session the replay
// passed exactly with the replayed state at its sequence number.
func (v *verifier) checkSnapshots(s *Session) {
	for _, snap := range s.Snapshots {
		hdr, ok := v.snapHdr[snap.Key]
		if !ok {
			continue // loaded by the replay itself, damaged, or vanished
		}
		state, ok := v.chain[hdr.Seq]
		if !ok {
			continue // the replay did not stop at this sequence number
		}
		if msg := compareLanes(hdr, state); msg != "" {
			v.add(Problem{Key: snap.Key, Kind: KindChecksum, Severity: Damage, Epoch: s.Epoch,
				Message: fmt.Sprintf("disagrees with the log replayed to seq %d: %s", hdr.Seq, msg)})
		}
	}
}

// compareLanes describes how a snapshot header differs from a replayed
// state, or returns "".
func compareLanes(hdr frames.Snapshot, state []lanes.Lane) string {
	if len(hdr.Lanes) != len(state) {
		return fmt.Sprintf("%d lanes, the log has %d", len(hdr.Lanes), len(state))
	}
	for i, l := range hdr.Lanes {
		st := state[i]
		if l.Lane != st.Number || l.Checksum != st.Checksum || l.Bytes != uint64(st.Bytes()) {
			return fmt.Sprintf("lane %d has %d bytes with checksum %s, the log's lane %d has %d bytes with %s",
				l.Lane, l.Bytes, l.Checksum, st.Number, st.Bytes(), st.Checksum)
		}
	}
	return ""
}
