package chunks

import (
	"github.com/framectl/framectl/frames"
)

// ErrMissing: a chunk a manifest names does not exist. It is damage (the
// manifest cannot be loaded; it matches frames.ErrDamage), not an object
// that vanished under a reader: a manifest is stored only after its
// chunks, so a chunk it names is missing only if something deleted or
// lost it. It does not match bucket.ErrNotFound for that reason; the
// bucket's answer is in the message.
var ErrMissing = frames.NewDamage("chunk missing")

// Error is a failure to write or load one manifest, with the manifest's
// key and, when one chunk is concerned, the chunk's.
type Error struct {
	Op       string // "write" or "load"
	Manifest string // the manifest's key (snapshot/<epoch>/<seq>)
	Chunk    string // the chunk's key, "" when no one chunk is concerned
	Err      error
}

func (e *Error) Error() string {
	msg := "chunks: " + e.Op + " manifest " + e.Manifest
	if e.Chunk != "" {
		msg += ": chunk" + frames.KeyText(e.Chunk, e.Err)
	}
	return msg + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// PrintsKey reports whether key is the manifest or the chunk the error
// names (frames.KeyPrinter).
func (e *Error) PrintsKey(key string) bool {
	return key == e.Manifest || e.Chunk != "" && key == e.Chunk
}
