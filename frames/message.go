package frames

import (
	"encoding/binary"
	"fmt"
	"io"

	capnp "capnproto.org/go/capnp/v3"
)

// Bounds of the standard stream framing that this package enforces itself.
// capnp's Decoder reports breaking them only as text: an errors.New("decode:
// message too large") and an unexported errSegIDTooLarge, both in codec.go of
// capnproto.org/go/capnp/v3. So msgReader reads the segment table, checks it,
// and hands capnp.Unmarshal a message whose framing is already known to be
// within bounds; whatever capnp still refuses is damage (ErrCorrupt).
const (
	// maxSegments: the writer makes single-segment messages; capnp's
	// Decoder accepts up to 513 (maxStreamSegments in message.go).
	maxSegments = 512
	// maxSegmentWords: a segment of more words does not fit Cap'n Proto's
	// 32-bit addresses (maxSegmentSize in address.go), and Unmarshal
	// refuses it.
	maxSegmentWords = (1<<32 - 8) / 8
)

// msgReader decodes the consecutive Cap'n Proto messages (standard stream
// framing: segment table, then segments) of a decompressed object, one at a
// time, with every bound of Limits applied.
type msgReader struct {
	r     io.Reader // a *gzipReader, or the bytes of a zstd chunk's header frame
	lim   Limits
	table []byte // the segment table of a multi-segment message, reused
}

func newMsgReader(r io.Reader, lim Limits) *msgReader {
	return &msgReader{r: r, lim: lim}
}

// next returns the next message and its size in bytes, or io.EOF at the
// verified end of the object.
func (m *msgReader) next() (*capnp.Message, uint64, error) {
	data, err := m.read()
	if err != nil {
		return nil, 0, err
	}
	msg, err := capnp.Unmarshal(data)
	if err != nil {
		return nil, 0, corruptCause("bad message framing", err)
	}
	size := uint64(len(data))
	// Traversal counts the bytes each accessor reads; a reader that reads
	// every field once stays under the message size. Twice that leaves room
	// and still stops amplification through shared or zero-sized pointers.
	msg.ResetReadLimit(2*size + 64)
	msg.DepthLimit = m.lim.DepthLimit
	return msg, size, nil
}

// read returns the bytes of the next message, segment table included. It
// checks the table against the limits before allocating for the segments:
// a table claiming a 2 GiB segment is refused having read 8 bytes.
func (m *msgReader) read() ([]byte, error) {
	// First word: segment count - 1, then the size of segment 0 in words.
	var first [8]byte
	if _, err := io.ReadFull(m.r, first[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF // clean end: the gzip reader verified the trailer
		}
		return nil, m.cut(err)
	}
	count := uint64(binary.LittleEndian.Uint32(first[:])) + 1
	if count > maxSegments {
		return nil, tooLarge(fmt.Sprintf("message has %d segments, more than the limit (%d)", count, maxSegments))
	}
	// The table is a uint32 count and a uint32 size per segment, padded to
	// a whole word.
	tableSize := ((count+1)*4 + 7) &^ 7
	if tableSize > m.lim.MaxMessageSize {
		return nil, tooLarge(fmt.Sprintf("message segment table of %d bytes, larger than the limit (%d)", tableSize, m.lim.MaxMessageSize))
	}
	table := first[:]
	if count > 1 {
		m.table = append(m.table[:0], first[:]...)
		m.table = append(m.table, make([]byte, tableSize-8)...)
		if _, err := io.ReadFull(m.r, m.table[8:]); err != nil {
			return nil, m.cut(err)
		}
		table = m.table
	}
	total := tableSize
	for i := range count {
		words := uint64(binary.LittleEndian.Uint32(table[4+4*i:]))
		if words > maxSegmentWords {
			return nil, tooLarge(fmt.Sprintf("message segment of %d words, larger than Cap'n Proto allows", words))
		}
		total += words * 8 // at most 512 × 2^32 × 8: no overflow
	}
	if total > m.lim.MaxMessageSize {
		return nil, tooLarge(fmt.Sprintf("message of %d bytes, larger than the limit (%d)", total, m.lim.MaxMessageSize))
	}
	data := make([]byte, total)
	copy(data, table)
	if _, err := io.ReadFull(m.r, data[tableSize:]); err != nil {
		return nil, m.cut(err)
	}
	return data, nil
}

// cut is the error for content that ends, or fails, inside a message.
func (m *msgReader) cut(err error) error {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		// The gzip reader verified its trailer and seal: the object is whole
		// and what it holds is not what the writer makes.
		return corrupt("content ends inside a message")
	}
	return err // damage, truncation or I/O, as the gzip reader reported it
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
