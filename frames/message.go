package frames

import (
	"io"
	"strings"

	capnp "capnproto.org/go/capnp/v3"
)

// msgReader decodes the consecutive Cap'n Proto messages (standard stream
// framing: segment table, then segments) of a decompressed object, one at a
// time, with every bound of Limits applied.
type msgReader struct {
	g   *gzipReader
	dec *capnp.Decoder
	lim Limits
}

func newMsgReader(g *gzipReader, lim Limits) *msgReader {
	dec := capnp.NewDecoder(g)
	// The decoder refuses a segment table claiming more than this before
	// allocating anything.
	dec.MaxMessageSize = lim.MaxMessageSize
	return &msgReader{g: g, dec: dec, lim: lim}
}

// next returns the next message and its size in bytes, or io.EOF at the
// verified end of the object.
func (m *msgReader) next() (*capnp.Message, uint64, error) {
	before := m.g.n
	msg, err := m.dec.Decode()
	if err != nil {
		switch {
		case err == io.EOF:
			return nil, 0, io.EOF // clean end: the gzip reader verified the trailer
		case m.g.err != nil && m.g.err != io.EOF:
			return nil, 0, m.g.err // the real cause: damage, truncation or I/O
		case strings.Contains(err.Error(), "too large"):
			// capnp's decoder reports an oversized segment table or
			// message only as text ("decode: message too large").
			return nil, 0, tooLarge("message larger than the limit")
		case strings.Contains(err.Error(), "exceeds max segment count"):
			return nil, 0, tooLarge("message has more segments than the limit (512)")
		case m.g.err == io.EOF:
			return nil, 0, corrupt("content ends inside a message")
		default:
			return nil, 0, corruptCause("bad message framing", err)
		}
	}
	size := m.g.n - before
	// Traversal counts the bytes each accessor reads; a reader that reads
	// every field once stays under the message size. Twice that leaves room
	// and still stops amplification through shared or zero-sized pointers.
	msg.ResetReadLimit(2*size + 64)
	msg.DepthLimit = m.lim.DepthLimit
	return msg, size, nil
}

// writeMessage writes msg with standard stream framing.
func writeMessage(w io.Writer, msg *capnp.Message) error {
	return capnp.NewEncoder(w).Encode(msg)
}

// newMessage returns an empty single-segment message with room for about
// size bytes, so building a frame does not copy its pages twice.
func newMessage(size int) (*capnp.Message, *capnp.Segment, error) {
	return capnp.NewMessage(capnp.SingleSegment(make([]byte, 0, size)))
}
