package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The WAL file as SQLite writes it (https://sqlite.org/fileformat2.html#walformat,
// wal.c). Integers are big-endian. This layout is SQLite's, not ours: the
// constants below must match it exactly.
//
//	WAL header: 32 bytes at offset 0, written once per generation
//	+-------+---------+-----------+----------+--------+--------+------------------+
//	| magic | version | page size | ckpt seq | salt-1 | salt-2 | checksum-1, -2   |
//	| 0..4  | 4..8    | 8..12     | 12..16   | 16..20 | 20..24 | 24..32 over 0..24|
//	+-------+---------+-----------+----------+--------+--------+------------------+
//
//	WAL frame i (1-based) at 32 + (i-1)*(24+page size)
//	+---------+-------------------+--------+--------+----------------+-----------+
//	| page no | db size after     | salt-1 | salt-2 | checksum-1, -2 | page      |
//	| 0..4    | commit, 0 if none | 8..12  | 12..16 | 16..24         | 24..24+ps |
//	|         | 4..8              |        |        |                |           |
//	+---------+-------------------+--------+--------+----------------+-----------+
//
// A WAL frame whose "db size" is nonzero is a commit frame: it ends a
// transaction. A WAL frame belongs to the current generation only if its
// salts equal the header's (readers stop at the first frame that does not
// match). The frame checksums chain from the header through every frame; the
// capture does not verify them (SQLite writes them, sometimes twice: see
// opRewrite in wal.go), only the header's own checksum.
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
	walMagic           = 0x377f0682 // | 1: checksums computed big-endian
	walVersion         = 3007000
)

// walHeader is the part of a WAL header the capture tracks.
type walHeader struct {
	pageSize     uint32
	ckptSeq      uint32
	salt1, salt2 uint32
	bigEndian    bool // checksums read big-endian
}

var errBadWALHeader = errors.New("malformed WAL header")

// parseWALHeader decodes and checks a 32-byte WAL header.
func parseWALHeader(b []byte) (walHeader, error) {
	if len(b) != walHeaderSize {
		return walHeader{}, fmt.Errorf("%w: %d bytes", errBadWALHeader, len(b))
	}
	magic := be32(b[0:4])
	if magic&^1 != walMagic {
		return walHeader{}, fmt.Errorf("%w: magic %08x", errBadWALHeader, magic)
	}
	if v := be32(b[4:8]); v != walVersion {
		return walHeader{}, fmt.Errorf("%w: version %d", errBadWALHeader, v)
	}
	h := walHeader{pageSize: be32(b[8:12]), ckptSeq: be32(b[12:16]), salt1: be32(b[16:20]), salt2: be32(b[20:24]), bigEndian: magic&1 != 0}
	if h.pageSize < 512 || h.pageSize > 65536 || h.pageSize&(h.pageSize-1) != 0 {
		return walHeader{}, fmt.Errorf("%w: page size %d", errBadWALHeader, h.pageSize)
	}
	s1, s2 := walChecksum(b[:24], h.bigEndian, 0, 0)
	if s1 != be32(b[24:28]) || s2 != be32(b[28:32]) {
		return walHeader{}, fmt.Errorf("%w: checksum mismatch", errBadWALHeader)
	}
	return h, nil
}

// walChecksum is SQLite's WAL checksum (wal.c walChecksumBytes): it
// continues the running checksum s1, s2 over b, a multiple of 8 bytes;
// bigEndian comes from the magic's low bit.
func walChecksum(b []byte, bigEndian bool, s1, s2 uint32) (uint32, uint32) {
	var order binary.ByteOrder = binary.LittleEndian
	if bigEndian {
		order = binary.BigEndian
	}
	for i := 0; i+8 <= len(b); i += 8 {
		s1 += order.Uint32(b[i:]) + s2
		s2 += order.Uint32(b[i+4:]) + s1
	}
	return s1, s2
}

// walFrameOffset is where WAL frame idx (1-based) starts: wal.c walFrameOffset.
// walFrameOffset(next) is also the end of the frames before next.
func walFrameOffset(idx, pageSize uint32) int64 {
	return walHeaderSize + int64(idx-1)*(walFrameHeaderSize+int64(pageSize))
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
