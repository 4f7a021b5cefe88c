package chunks

import (
	"errors"
	"strings"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// ErrMissing: a chunk a manifest names does not exist. It is damage (the
// manifest cannot be loaded), not an object that vanished under a
// reader: a manifest is stored only after its chunks, so a chunk it names
// is missing only if something deleted or lost it. It does not match
// bucket.ErrNotFound for that reason; the bucket's answer is in the
// message.
var ErrMissing = errors.New("chunk missing")

// Error is a failure to write or load one manifest, with the manifest's
// key and, when one chunk is concerned, the chunk's.
type Error struct {
	Op       string // "write" or "load"
	Manifest string // the manifest's key (snapshot/<epoch>/<seq>)
	Chunk    string // the chunk's key, "" when no one chunk is concerned
	Err      error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("chunks: ")
	b.WriteString(e.Op)
	b.WriteString(" manifest ")
	b.WriteString(e.Manifest)
	if e.Chunk != "" {
		b.WriteString(": chunk")
		if !printsKey(e.Err, e.Chunk) {
			b.WriteString(" ")
			b.WriteString(e.Chunk)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// printsKey reports whether err names key already (the errors of frames
// and bucket carry the key of their object).
func printsKey(err error, key string) bool {
	var (
		fe *frames.Error
		be *bucket.Error
	)
	return (errors.As(err, &fe) && fe.Key == key) || (errors.As(err, &be) && be.Key == key)
}
