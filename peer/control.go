package peer

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// Control frames carry what the transport says for itself, never for an
// actor: heartbeats, and the questions a claimant asks an actor's
// followers about its owner (doc.go, "Control frames"). Part of the wire
// format of version 3: never change these.
const (
	controlHeartbeat = 1 // no body
	controlAsk       = 2 // query ID (8) | subject length (1) | subject
	controlAnswer    = 3 // query ID (8) | subject length (1) | subject | known (1) | silence in ms (4)

	queryIDBytes = 8
	// maxControlBytes is the longest control payload: an answer naming a
	// subject of 255 bytes, with the marker and kind bytes in front.
	maxControlBytes = 2 + queryIDBytes + 1 + 255 + 1 + 4
)

// control is one decoded control frame.
type control struct {
	kind    byte
	query   uint64
	subject follow.FollowerID
	known   bool
	silence time.Duration // whole milliseconds, at most math.MaxUint32 of them
}

// appendControl appends c's payload: the marker 0 (where a message's
// payload has its actor's length, 1 or more), the kind and its body.
func appendControl(dst []byte, c control) []byte {
	dst = append(dst, 0, c.kind)
	if c.kind == controlHeartbeat {
		return dst
	}
	dst = binary.LittleEndian.AppendUint64(dst, c.query)
	dst = append(append(dst, byte(len(c.subject))), c.subject...)
	if c.kind == controlAsk {
		return dst
	}
	known := byte(0)
	if c.known {
		known = 1
	}
	ms := min(c.silence.Milliseconds(), math.MaxUint32)
	return binary.LittleEndian.AppendUint32(append(dst, known), uint32(max(ms, 0)))
}

// parseControl decodes an authenticated payload that starts with the
// control marker. Each kind has exactly one length: anything else, an
// unknown kind or a subject that is not a node ID is frames.ErrCorrupt
// (frames.ErrTruncated when it stops short).
func parseControl(payload []byte) (control, error) {
	if len(payload) < 2 {
		return control{}, fmt.Errorf("a control frame of %d bytes, without its kind: %w", len(payload), frames.ErrTruncated)
	}
	if len(payload) > maxControlBytes {
		return control{}, fmt.Errorf("a control frame of %d bytes, past the %d the longest takes: %w", len(payload), maxControlBytes, frames.ErrCorrupt)
	}
	c := control{kind: payload[1]}
	body := payload[2:]
	switch c.kind {
	case controlHeartbeat:
		if len(body) != 0 {
			return control{}, fmt.Errorf("a heartbeat with %d bytes of body, not none: %w", len(body), frames.ErrCorrupt)
		}
		return c, nil
	case controlAsk, controlAnswer:
	default:
		return control{}, fmt.Errorf("control frame kind %d: %w", c.kind, frames.ErrCorrupt)
	}
	if len(body) < queryIDBytes+1 {
		return control{}, fmt.Errorf("control frame kind %d: %d bytes, before its subject: %w", c.kind, len(body), frames.ErrTruncated)
	}
	c.query = binary.LittleEndian.Uint64(body)
	n := int(body[queryIDBytes])
	rest := body[queryIDBytes+1:]
	tail := 0
	if c.kind == controlAnswer {
		tail = 5
	}
	switch {
	case n > len(rest):
		return control{}, fmt.Errorf("control frame kind %d: a subject of %d bytes, %d left: %w", c.kind, n, len(rest), frames.ErrTruncated)
	case len(rest) != n+tail:
		return control{}, fmt.Errorf("control frame kind %d: %d bytes after a subject of %d, not %d: %w", c.kind, len(rest)-n, n, tail, frames.ErrCorrupt)
	}
	c.subject = follow.FollowerID(rest[:n])
	if err := checkID(c.subject); err != nil {
		return control{}, fmt.Errorf("control frame kind %d: subject: %v: %w", c.kind, err, frames.ErrCorrupt)
	}
	if c.kind == controlAnswer {
		switch rest[n] {
		case 0:
		case 1:
			c.known = true
		default:
			return control{}, fmt.Errorf("an answer whose known byte is %d, not 0 or 1: %w", rest[n], frames.ErrCorrupt)
		}
		c.silence = time.Duration(binary.LittleEndian.Uint32(rest[n+1:])) * time.Millisecond
	}
	return c, nil
}
