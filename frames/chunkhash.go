package frames

import (
	"crypto/sha256"
	"strconv"
)

// ChunkHash names a chunk object by its content: the SHA-256 of the chunk's
// uncompressed pages (SumChunk), defined under "Chunks and manifests" in the
// package documentation (doc.go). In text (String, MarshalText, and so JSON)
// and in chunk keys it is 64 lowercase hex digits.
//
// SHA-256 because a chunk is shared by every manifest that lists the same
// hash: two different contents with one hash would make a restore read the
// wrong pages without any check noticing, so the hash must be
// collision-resistant, not merely good at catching accidents as the xxhash
// of the seal and the rolling checksum are.
type ChunkHash [32]byte

// SumChunk returns the hash of a chunk's content.
func SumChunk(content []byte) ChunkHash { return sha256.Sum256(content) }

// String returns h as 64 lowercase hex digits.
func (h ChunkHash) String() string { return string(h.appendHex(make([]byte, 0, 64))) }

func (h ChunkHash) appendHex(dst []byte) []byte {
	for _, b := range h {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

// ParseChunkHash parses what String returns: exactly 64 lowercase hex
// digits.
func ParseChunkHash(s string) (ChunkHash, error) {
	var h ChunkHash
	if len(s) != 2*len(h) {
		return ChunkHash{}, &Error{Object: "chunk hash", Key: strconv.Quote(s), Err: invalid("not 64 hex digits")}
	}
	for i := range h {
		hi, lo := hexValue(s[2*i]), hexValue(s[2*i+1])
		if hi == 255 || lo == 255 {
			return ChunkHash{}, &Error{Object: "chunk hash", Key: strconv.Quote(s), Err: invalid("not lowercase hex")}
		}
		h[i] = hi<<4 | lo
	}
	return h, nil
}

// MarshalText returns h as String does.
func (h ChunkHash) MarshalText() ([]byte, error) { return h.appendHex(make([]byte, 0, 64)), nil }

// UnmarshalText parses what MarshalText returns (ParseChunkHash).
func (h *ChunkHash) UnmarshalText(text []byte) error {
	v, err := ParseChunkHash(string(text))
	if err != nil {
		return err
	}
	*h = v
	return nil
}
