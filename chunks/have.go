package chunks

import "github.com/framectl/framectl/frames"

// Have is the set of chunks a bucket is known to hold for an actor, by
// hash, with each object's stored size (which a manifest naming it
// records). Write uploads only chunks not in it.
type Have map[frames.ChunkHash]uint64

// HaveOf returns the chunks the manifests name: a manifest is stored only
// after its chunks, so a manifest read from the bucket proves them stored.
// Nil manifests are passed over.
func HaveOf(ms ...*frames.Manifest) Have {
	h := Have{}
	for _, m := range ms {
		if m == nil {
			continue
		}
		for _, l := range m.Lanes {
			for _, c := range l.Chunks {
				h[c.Hash] = c.StoredSize
			}
		}
	}
	return h
}
