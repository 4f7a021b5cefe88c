package chunks

import (
	"runtime"

	"github.com/framectl/framectl/frames"
)

// Options tune Write and Load. The zero value gives the defaults.
type Options struct {
	// Compression is the DEFLATE level of the manifest Write encodes, and
	// the level its zstd chunks map it to (frames.WriteOptions.Level; 0:
	// frames.DefaultLevel, zstd's fastest).
	Compression int
	// Parallelism is how many chunks are encoded and uploaded, or fetched
	// and decoded, at once (default DefaultParallelism, or 2 × GOMAXPROCS
	// if more). MaxInflightBytes may allow fewer.
	Parallelism int
	// MaxInflightBytes bounds the chunk bytes held in memory at once
	// (default DefaultMaxInflightBytes). Workers are only as many as the
	// budget holds; one always runs, whatever the size of a chunk.
	MaxInflightBytes int64
	// Limits bound the decoding of every chunk Load reads.
	Limits frames.Limits
	// HashContent, for Load and Touch, recomputes every chunk's SHA-256
	// (frames.ReadChunk) instead of leaving its content to the manifest's
	// checksum (frames.ReadChunkSealed): for verify, which must name a
	// chunk whose content is not what its key says.
	HashContent bool
	// Prior, for Write, is a manifest read from the bucket (so its chunks
	// are stored) whose chunks may be named without reading them: a chunk
	// of the same lane, page size and range whose recorded fingerprint is
	// what the source's tracker gives for the range (lanes.Tracker.
	// Fingerprint) holds the same pages, and Write names it without
	// reading or hashing them. A wake that changed little then reads only
	// what changed. Nil: every chunk is read.
	Prior *frames.Manifest
}

// DefaultParallelism is the default of Options.Parallelism. A worker
// spends most of a chunk's time waiting for the bucket, not on the CPU:
// restoring 1 GiB of 256 KiB chunks from versitygw on the same machine
// took 3.2-4.1 s with 4 workers (2 × GOMAXPROCS on 2 cores), 2.2-3.5 s
// with 16, 2.1-2.4 s with 32 and no less with 64 (alternating runs, one
// process). 16 workers hold 8 MiB of a restore's 64 MiB.
const DefaultParallelism = 16

// DefaultMaxInflightBytes is the default of Options.MaxInflightBytes:
// 256 chunks of the default size, more than enough workers to hide a
// bucket's latency, and the memory a restore may use.
const DefaultMaxInflightBytes = 64 << 20

func (o Options) withDefaults() Options {
	if o.Parallelism <= 0 {
		o.Parallelism = max(DefaultParallelism, 2*runtime.GOMAXPROCS(0))
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	return o
}

// readerBytes is what a worker reading chunks of content bytes holds:
// the content, and, while a zstd chunk decodes, its stored bytes, which
// frames.ReadChunk reads whole (at most about the content's size).
func readerBytes(content int64) int64 { return 2 * content }

// workers is how many workers fit the budget when each holds perWorker
// bytes: at least one, at most Parallelism.
func (o Options) workers(perWorker int64, jobs int) int {
	n := int64(o.Parallelism)
	if perWorker > 0 {
		n = min(n, o.MaxInflightBytes/perWorker)
	}
	return int(max(1, min(n, int64(jobs))))
}
