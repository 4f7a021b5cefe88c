//go:build unix

package session

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/framectl/framectl/frames"
)

// capturedWord is the captured sequence of the state file, in a shared
// read-write mapping of the file: stores go straight to the page cache,
// and a process that dies keeps them, as it keeps what it wrote. Stored
// little-endian, as the file format says.
type capturedWord struct {
	mapping []byte
	word    *uint64
}

// mapCaptured maps the state file (stateSize bytes) shared and returns its
// captured word.
func mapCaptured(f *os.File) (*capturedWord, error) {
	m, err := unix.Mmap(int(f.Fd()), 0, stateSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	// offCaptured+8 is 8-byte aligned within a page-aligned mapping.
	return &capturedWord{mapping: m, word: (*uint64)(unsafe.Pointer(&m[offCaptured+8]))}, nil
}

// littleEndianHost: a native store is a little-endian store.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func (c *capturedWord) store(s frames.Seq) {
	seq := uint64(s)
	if !littleEndianHost {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], seq)
		seq = binary.NativeEndian.Uint64(b[:])
	}
	atomic.StoreUint64(c.word, seq)
}

func (c *capturedWord) unmap() { unix.Munmap(c.mapping) }
