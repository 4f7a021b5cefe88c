package frames

// DefaultChunkBytes is the chunk size a manifest's writer uses unless it
// has a reason not to: DefaultChunkPages pages per chunk. Readers assume
// nothing about it (each lane of a manifest records its chunkPages), so it
// can change without a new format version. Why 256 KiB is under "Chunk
// size" in the package documentation (doc.go), with what BenchmarkChunk
// and BenchmarkManifest measured.
const DefaultChunkBytes = 256 << 10

// DefaultChunkPages returns the pages per chunk for a lane of pageSize
// bytes per page: DefaultChunkBytes of them, at least 1.
func DefaultChunkPages(pageSize uint32) uint32 {
	if pageSize == 0 || pageSize >= DefaultChunkBytes {
		return 1
	}
	return DefaultChunkBytes / pageSize
}
