package restore

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/iocount"
	"github.com/framectl/framectl/internal/workers"
)

// decodeRest reads every object the replay did not read to its end.
func (v *verifier) decodeRest(ctx context.Context) error {
	var todo []Object
	for _, s := range v.inv.Sessions {
		for _, o := range append(slices.Clone(s.Snapshots), s.Batches...) {
			if !v.verified[o.Key] && !v.reported[o.Key] {
				todo = append(todo, o)
			}
		}
	}
	return workers.Run(ctx, todo, min(v.opts.Parallelism, len(todo)), func(ctx context.Context, _ *struct{}, o Object) error {
		return v.decode(ctx, o)
	})
}

// decode reads one object to its verified end. Damage goes into the
// report; an object that vanished is passed over (compaction deleted it);
// the error is for I/O.
func (v *verifier) decode(ctx context.Context, o Object) error {
	rc, _, err := v.b.Get(ctx, o.Key)
	if errors.Is(err, bucket.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	cr := iocount.NewReader(rc, nil)
	var hdrErr error
	if o.Kind == frames.KeyLog {
		var hdr frames.BatchHeader
		hdr, hdrErr = decodeBatch(cr, o.Key, v.opts.Limits)
		if hdrErr == nil {
			v.mu.Lock()
			v.batchHdr[o.Key] = hdr
			v.mu.Unlock()
		}
	} else {
		var hdr frames.Snapshot
		var m *frames.Manifest
		hdr, m, hdrErr = decodeSnapshot(cr, o.Key, v.opts.Limits)
		if hdrErr == nil {
			v.mu.Lock()
			v.snapHdr[o.Key] = hdr
			if m != nil {
				v.manifests[o.Key] = m // its chunks: checkChunks
			}
			v.mu.Unlock()
		}
	}
	v.mu.Lock()
	v.rep.Objects++
	v.rep.Bytes += cr.Count()
	v.mu.Unlock()
	if v.progress != nil {
		v.progress(Progress{Actor: v.a, Phase: PhaseVerify, Key: o.Key})
	}
	if hdrErr != nil {
		kind, sev := classify(hdrErr)
		if sev == 0 {
			return hdrErr
		}
		v.add(Problem{Key: o.Key, Kind: kind, Severity: sev, Epoch: o.Epoch, Message: v.describe(ctx, o.Key, hdrErr)})
	}
	return nil
}

// decodeBatch reads a batch to its verified end.
func decodeBatch(r io.Reader, key string, lim frames.Limits) (frames.BatchHeader, error) {
	br, err := frames.NewBatchReader(r, key, lim)
	if err != nil {
		return frames.BatchHeader{}, err
	}
	for {
		if _, err := br.Next(); err == io.EOF {
			return br.Header(), nil
		} else if err != nil {
			return frames.BatchHeader{}, err
		}
	}
}

// decodeSnapshot reads a snapshot object to its verified end: a full
// snapshot with its lanes, or a manifest (returned too; its chunks are
// other objects).
func decodeSnapshot(r io.Reader, key string, lim frames.Limits) (frames.Snapshot, *frames.Manifest, error) {
	sr, m, err := frames.OpenSnapshot(r, key, lim)
	if err != nil {
		return frames.Snapshot{}, nil, err
	}
	if m != nil {
		return m.Header(), m, nil
	}
	for {
		_, lr, err := sr.NextLane()
		if err == io.EOF {
			return sr.Header(), nil, nil
		}
		if err != nil {
			return frames.Snapshot{}, nil, err
		}
		if _, err := io.Copy(io.Discard, lr); err != nil {
			return frames.Snapshot{}, nil, err
		}
	}
}
