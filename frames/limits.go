package frames

import "cmp"

// Limits bound what a decoder will read, allocate or accept. The zero value
// of a field means its default. Every decoder applies them before it trusts a
// length it read: a header claiming a 2 GiB message is refused without
// allocating it.
type Limits struct {
	// MaxMessageSize bounds one Cap'n Proto message (a batch header, one
	// frame or frame part, a snapshot header), segment table included.
	// Default 16 MiB: four times the largest part the writer makes.
	MaxMessageSize uint64
	// MaxBatchBytes bounds a batch file's decompressed content. Default
	// 4 GiB. A gzip bomb stops here; memory is bounded by MaxMessageSize.
	MaxBatchBytes uint64
	// MaxSnapshotBytes bounds a snapshot file's decompressed content.
	// Default 64 GiB. Snapshots stream, so this bounds time, not memory.
	MaxSnapshotBytes uint64
	// MaxManifestSize bounds a manifest, one Cap'n Proto message read
	// whole, and so the first message of a snapshot object read with
	// OpenSnapshot until its version is known. Default 64 MiB: a chunk
	// reference takes 64 bytes of it, so about a million chunks, 256 GiB
	// of database at DefaultChunkBytes (past MaxSnapshotBytes' default).
	MaxManifestSize uint64
	// MaxChunkBytes bounds a chunk's content: the most ReadChunk allocates
	// for it, and so the largest chunk a manifest may name. Default
	// 16 MiB: 64 times DefaultChunkBytes, room for a writer that chooses
	// larger chunks.
	MaxChunkBytes uint64
	// DepthLimit bounds pointer nesting. Default 8; the schema needs 4.
	DepthLimit uint
	// MaxLanes bounds the lanes of a snapshot or a manifest. Default 1024.
	MaxLanes int
}

// Default limits.
const (
	DefaultMaxMessageSize   = 16 << 20
	DefaultMaxBatchBytes    = 4 << 30
	DefaultMaxSnapshotBytes = 64 << 30
	DefaultMaxManifestSize  = 64 << 20
	DefaultMaxChunkBytes    = 16 << 20
	DefaultDepthLimit       = 8
	DefaultMaxLanes         = 1024
)

// withDefaults returns l with each zero field set to its default.
func (l Limits) withDefaults() Limits {
	l.MaxMessageSize = cmp.Or(l.MaxMessageSize, DefaultMaxMessageSize)
	l.MaxBatchBytes = cmp.Or(l.MaxBatchBytes, DefaultMaxBatchBytes)
	l.MaxSnapshotBytes = cmp.Or(l.MaxSnapshotBytes, DefaultMaxSnapshotBytes)
	l.MaxManifestSize = cmp.Or(l.MaxManifestSize, DefaultMaxManifestSize)
	l.MaxChunkBytes = cmp.Or(l.MaxChunkBytes, DefaultMaxChunkBytes)
	l.DepthLimit = cmp.Or(l.DepthLimit, DefaultDepthLimit)
	l.MaxLanes = cmp.Or(l.MaxLanes, DefaultMaxLanes)
	return l
}
