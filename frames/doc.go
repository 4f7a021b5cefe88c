// Package frames owns the bytes framectl puts in a bucket: batch files,
// snapshot files and manifests (gzip around Cap'n Proto messages), chunk
// files (zstd, or gzip as written before), the object key layout and its number encodings, and the rolling
// database checksum that chains frames together. The formats are drawn below,
// under Wire format.
//
// Everything read from a bucket is untrusted. Every decoder here is bounded
// ([Limits]): message size, pointer traversal and depth, decompressed size,
// list lengths are all checked before anything is allocated on their account,
// the gzip header and trailer and the zstd frame are checked exactly, trailing bytes are
// rejected, and unknown union tags are errors rather than panics. A damaged
// object yields an [*Error] naming the object key and what is wrong, matching
// [ErrCorrupt], [ErrTruncated], [ErrTooLarge] or [ErrUnknownKind] with
// errors.Is, and [ErrDamage]: the sentinel every error that means a stored
// object is damaged matches, from this package or any other, which also
// says what is not damage.
//
// Streaming decoders hand out data before the end of the object is reached,
// so nothing they return is trusted until the final call reports io.EOF: only
// then have the gzip CRC-32, the lengths, the counts and the checksums been
// verified. Callers write what they read to scratch space and publish it only
// after that.
//
// This package must never do I/O of its own beyond the reader or writer it is
// given, and never interpret what a frame means for a database: applying
// frames to files belongs to package lanes.
//
// # Wire format
//
// Everything from here on is part of the wire format: keys and objects
// written today must read the same way forever. The messages are defined
// field by field in capnp/frames.capnp; a change to what is written is a new
// formatVersion, manifestFormatVersion or chunk format version there, and the
// golden files in frames/testdata/golden pin the encoded bytes of these
// ones. The sections below are Object keys, Numbers in keys, Batch files,
// Snapshot files, Manifests, Chunk files, Chunk size, Gzip file and seal,
// and Rolling checksum.
//
// # Object keys
//
//	do/<namespace>/<actor>/chunk/<hash>               a chunk file
//	do/<namespace>/<actor>/log/<epoch>/<last seq>     a batch file
//	do/<namespace>/<actor>/own.json                   ownership record
//	do/<namespace>/<actor>/snapshot/<epoch>/<seq>     a snapshot file or a manifest
//	nodes/<node>.json                                 a node's lease
//	followers/<follower>.json                         a follower store's identity record
//	alarms/<namespace>/<due>/<actor>.<gen>            an entry of a namespace's alarm index
//
// <namespace> is [NamespaceID](tenant, namespace): 22 characters of unpadded
// base64url. <actor> is the lowercase hex of the actor's ID bytes
// ([ActorKey], 1 to [MaxActorIDBytes] bytes). <epoch> is the ownership
// epoch that wrote the object (the objects of one epoch are its session),
// <last seq> the last sequence number ([Seq]) in the batch, <seq> the
// sequence number the snapshot covers through. <hash> is the 64 lowercase
// hex digits of the SHA-256 of the chunk's content ([ChunkHash]). <node> is
// 1 to [MaxNodeIDLen] characters of [a-z0-9-] not starting with '-'
// ([ValidNodeID]), as is <follower>, a follower store's ID. [Actor.OwnKey],
// [Actor.LogKey], [Actor.SnapshotKey], [Actor.ChunkKey], [NodeKey],
// [FollowerKey] and [Actor.AlarmKey] build keys; [ParseKey] parses them.
// The contents of own.json, of a node's lease and of a follower's identity
// record belong to package fence.
//
// An actor's keys list in the order drawn: chunk/, log/, own.json,
// snapshot/. A reader of a listing that wants only some of them can resume
// past the rest (package fence does, looking for own.json).
//
// An alarm index entry says that the actor's database holds an alarm of
// generation <gen> due at <due>, Unix milliseconds, both ascending: a
// listing of alarms/<namespace>/ is in due order, and a listing that
// starts after [AlarmDueAfter](namespace, t) starts at the entries due at
// t. The entry is empty; the alarm itself is in the actor's database, and
// what the entries mean (when they are written, when they are stale) is
// package host's. The index is outside do/ so that neither a listing of an
// actor's objects nor one of do/ ever pages through it.
//
// No key is a "directory" of another key (versitygw and the directory bucket
// store keys as files): chunk/, log/, own.json and snapshot/ are siblings,
// and every number is a leaf or a directory, never both at one level (an
// alarm's <due> is always a directory, <actor>.<gen> always a leaf).
//
// Parsing is strict: a string parses only if the encoder produces exactly
// that string, so two keys never name the same object.
//
// # Numbers in keys
//
// Numbers are length-prefixed lowercase hex. Ascending, asc(n) ([Asc]) is
// one hex digit holding (number of digits - 1) followed by the digits of n
// without leading zeros:
//
//	0 -> "00"   15 -> "0f"   16 -> "110"   256 -> "2100"   2^64-1 -> "fffffffffffffffff"
//
// The length digit makes every shorter number sort before every longer one,
// so byte order equals numeric order and no encoding is a prefix of another.
// Descending, desc(n) ([Desc]) replaces every character c of asc(n) with
// 15 - c, which reverses the order: epochs and snapshot sequence numbers
// are descending, so a listing shows the newest first; batches' last
// sequence numbers are ascending, so a session's log lists in replay
// order. [ParseAsc] and
// [ParseDesc] accept only what the encoders produce.
//
// # Batch files
//
// A batch file, log/<epoch>/<last seq>, is written by [WriteBatch] and
// read by [NewBatchReader] or [ReadBatch]:
//
//	gzip file (Gzip file and seal) of:
//	+--------------------------+
//	| BatchHeader message      |  version, epoch, firstSeq, lastSeq, frameCount
//	+--------------------------+
//	| Frame message 1          |  each message in standard Cap'n Proto stream
//	| ...                      |  framing: segment count - 1, segment sizes
//	| Frame message frameCount |  (words), padding, segments
//	+--------------------------+
//
// Rules the writer obeys and the reader enforces:
//   - version is formatVersion; frameCount >= 1 and exactly that many frame
//     messages follow, then the gzip trailer, then nothing;
//   - every frame has the header's epoch; the first starts at firstSeq, each
//     next one starts right after the one before (no gap, no overlap), the
//     last ends at lastSeq;
//   - a frame whose pages exceed one message ([WriteOptions].MaxPartBytes) is
//     split into parts: consecutive messages repeating every field but the
//     pages, all but the last marked continued, page numbers ascending across
//     them;
//   - the key agrees: <epoch> is the epoch, <last seq> is lastSeq
//     ([KeyMismatchError] otherwise).
//
// Bounds: [Limits].MaxMessageSize per message (checked before allocation),
// pointer traversal of twice the message's size, [Limits].DepthLimit,
// [Limits].MaxBatchBytes of decompressed content, page lists no longer than
// the message could hold.
//
// # Snapshot files
//
// A snapshot file, snapshot/<epoch>/<seq>, is written by
// [NewSnapshotWriter] and read by [NewSnapshotReader], or by [OpenSnapshot],
// which reads whichever of a snapshot file and a manifest (next section) a
// snapshot key holds:
//
//	gzip file (Gzip file and seal) of:
//	+------------------------------+
//	| SnapshotHeader message       |  version, epoch, seq, commitTime,
//	+------------------------------+  lanes: (lane, kind, pageSize, byteLength, checksum)...
//	| lane 1: byteLength raw bytes |
//	| lane 2: byteLength raw bytes |  the lane's file, byte for byte, in the
//	| ...                          |  order of the header's lane list
//	+------------------------------+
//
// Rules the writer obeys and the reader enforces:
//   - version is formatVersion (1); lanes strictly ascending by number, of a
//     known kind, page size valid ([ValidPageSize]), byteLength a multiple of
//     the page size and at most [MaxDatabasePages] pages;
//   - exactly byteLength bytes follow for each lane, then the gzip trailer,
//     then nothing; each lane's bytes have the rolling checksum its entry
//     declares (checked as the last page of the lane is read);
//   - the key agrees: <epoch> is the epoch, <seq> is seq.
//
// Both directions stream: a snapshot of any size needs memory for one page
// and the compressor's window, never the database.
//
// # Manifests
//
// A manifest is a snapshot that lists its lanes as chunk files (next
// section) instead of holding their bytes, so that consecutive snapshots
// of a database share every chunk whose pages did not change. It sits at
// the snapshot key, snapshot/<epoch>/<seq>, in place of a snapshot file:
// everything that lists, plans or deletes snapshots treats both alike. It
// is written by [WriteManifest] and read by [ReadManifest] or
// [OpenSnapshot]:
//
//	gzip file (Gzip file and seal) of:
//	+------------------+
//	| Manifest message |  version, epoch, seq, commitTime,
//	+------------------+  predecessorEpoch, predecessorSeq,
//	                      lanes: (lane, kind, pageSize, pageCount, checksum, chunkPages,
//	                              chunks: (firstPage, pageCount, hash, storedSize, fingerprint)...)...
//
// A lane of pageCount pages is the content of its chunks, in order, each
// chunk the content of the actor's chunk/<hash>:
//
//	pages   1 .. c | c+1 .. 2c | ... | (n-1)c+1 .. pageCount      c = chunkPages
//	chunks  [0]      [1]               [n-1]: 1 to c pages        n = ceil(pageCount / c)
//
// Rules the writer obeys and the reader enforces:
//   - version is manifestFormatVersion (2). Manifest keeps version, epoch,
//     seq and commitTime where SnapshotHeader has them, so the version of
//     the first message tells the two apart: [OpenSnapshot] reads either,
//     [NewSnapshotReader] and [ReadManifest] refuse the other one naming
//     its version ([ErrUnknownKind]), and so does a build that knows only
//     format version 1;
//   - lanes strictly ascending by number, of a known kind, page size valid,
//     at most [MaxDatabasePages] pages, checksum 0 when empty; chunkPages at
//     least 1, and chunkPages pages at most [Limits].MaxChunkBytes;
//   - exactly n chunks; chunk i starts at page i*c+1 and holds c pages, the
//     last one the rest (1 to c): no gap, no overlap, nothing past
//     pageCount;
//   - every hash 32 bytes; every storedSize between the smallest object
//     the gzip framing allows and the chunk's bytes stored uncompressed
//     plus a margin (it is advisory: what the object measured when the
//     manifest was written, for budgets and accounting);
//   - fingerprint any value: the XOR of the range's page hashes as the
//     writer's tracker had them (0: not recorded). A reader has no pages to
//     check it against and never uses it; a writer uses it only to compare
//     with its own tracker's value for the same range (package chunks);
//   - lineage: predecessorEpoch is 0 for a session that started a new
//     database (predecessorSeq 0 too), otherwise below epoch, with
//     predecessorSeq at most seq;
//   - exactly one message, then the gzip trailer, then nothing;
//   - the key agrees: <epoch> is the epoch, <seq> is seq.
//
// The lineage is the session's, not the manifest's: every manifest a
// session writes carries the same predecessorEpoch and predecessorSeq (a
// compaction copies them), so it survives retention deleting the session's
// first manifest. Following it from the newest session back gives the
// actor's history across sessions: session epoch holds the state of
// session predecessorEpoch after commit predecessorSeq, and what that
// predecessor wrote past predecessorSeq (a fenced owner's late frames) is
// no one's history.
//
// What a manifest alone cannot prove is its reader's to check: that every
// chunk exists and holds its pages ([ReadChunk] with key
// [Actor.ChunkKey](hash) and size pageCount*pageSize), and that the pages,
// put together, have the lane's checksum.
//
// Bounds: the message is at most [Limits].MaxManifestSize, chunk
// references are counted across lanes against what the message can hold
// before anything is allocated for them, and the lanes hold at most
// [Limits].MaxSnapshotBytes. A manifest is read whole, and nothing in it
// is judged before the trailer and the seal verified.
//
// # Chunk files
//
// A chunk file, chunk/<hash>, holds a run of whole pages of a lane, and
// nothing about which: no lane, page numbers or page size. It is written
// by [WriteChunk] as a zstd chunk file (version 2) and read by
// [ReadChunk], which reads gzip chunk files (version 1), what framectl
// wrote before, as well; its first four bytes say which. Little-endian
// throughout:
//
//	zstd chunk file (version 2):
//	+----------------------+-----------+---------------------+
//	| 50 2a 4d 18          | uint32 n  | ChunkHeader message |  skippable frame 0 (RFC 8878, 3.1.2):
//	+----------------------+-----------+---------------------+  n bytes, version 2, byteLength, hash
//	| one zstd frame (RFC 8878, 3.1.1) of the byteLength bytes |  the pages, raw, in order; the frame
//	| of the pages                                             |  header declares byteLength, and the
//	+----------------------------------------------------------+  frame ends in its content checksum
//	| 5f 2a 4d 18 | 0a 00 00 00 | 'F' 'C' | xxhash64          |  skippable frame 15, 18 bytes: the seal,
//	+-------------+-------------+---------+------------------+  the xxhash64 of every byte before it
//
//	gzip chunk file (version 1), read only:
//	gzip file (Gzip file and seal) of:
//	+---------------------+
//	| ChunkHeader message |  version, byteLength, hash (72 bytes as written)
//	+---------------------+
//	| byteLength bytes    |  the pages, raw, in order
//	+---------------------+
//
// byteLength is the chunk's pages: its lane's chunkPages of them (the
// manifest's), the rest in a lane's last chunk. framectl writes chunks of
// 256 KiB ([DefaultChunkBytes]: 64 pages of 4 KiB, [DefaultChunkPages]);
// a reader assumes no size, and takes up to [Limits].MaxChunkBytes
// (16 MiB by default). Why 256 KiB is under Chunk size, below.
//
// Any zstd decoder (the zstd tool, zstd -dc) reads a zstd chunk file as
// exactly the pages: it skips skippable frames. Why zstd for chunks when
// every other object is gzip: a restore of compressible pages spent 62% of
// its CPU inflating DEFLATE, and zstd decodes the same pages 4.5 times as
// fast at the same ratio (BenchmarkCodec in package chunks; BENCHMARKS.md,
// "Chunk codecs"); chunks are most of what a restore reads. Batches stay
// gzip: they are small, and read once. The seal is the gzip seal's, for
// the same reason: zstd's content checksum covers the decoded bytes only.
// The reader reads the header frame, checks its size against the caller's
// before allocating anything for the content, then reads the rest whole
// (at most a zstd frame's bound for byteLength, plus the seal) and checks
// the seal, the frame header's declared size and checksum flag, that the
// frame's blocks end exactly at its checksum before the seal (one frame,
// nothing skippable inside), and decodes it into at most byteLength bytes.
// It does not verify the frame's checksum: the seal and the SHA-256 of the
// content leave it nothing to catch.
//
// Rules the writer obeys and the reader enforces:
//   - version is chunkZstdFormatVersion (2) in a zstd chunk file and
//     chunkFormatVersion (1) in a gzip one, and nothing else;
//   - byteLength is a positive multiple of 512 (the smallest page size),
//     at most [Limits].MaxChunkBytes, and, when the reader says what its
//     manifest expects, exactly that, checked before the content is
//     allocated;
//   - exactly byteLength bytes follow, then the frame's checksum or the
//     gzip trailer, then the seal, then nothing;
//   - hash is the SHA-256 of those bytes ([SumChunk]; [ReadChunkSealed]
//     leaves this one to a caller that checks the pages itself);
//   - the key agrees: <hash> is hash ([KeyMismatchError] otherwise, once
//     everything else verified: a sound chunk under another chunk's key).
//
// A chunk is named by its content, so it is written once and never
// changes: two manifests, two lanes or two page ranges with the same bytes
// share one object, and a writer that finds the key present need not
// upload it again. The name must be collision-resistant for that: two
// contents with one hash would make a restore read wrong pages that no
// other check notices, since the manifest's only claim about a chunk is
// its hash. SHA-256 is, and it is in the standard library
// (crypto/sha256, which uses the CPU's SHA extensions where present); the
// seal's xxhash64 and the rolling checksum catch accidents only.
//
// # Chunk size
//
// A manifest's writer chooses each lane's chunkPages; framectl writes
// [DefaultChunkBytes] (Chunk files, above). The size trades what a change
// costs against what a database costs:
//
//   - A snapshot uploads every chunk holding a changed page: one changed
//     page costs a whole chunk, so a small, hot database wants small
//     chunks. A 1.15 MB database is 5 chunks of 256 KiB, or 2 of 1 MiB,
//     which shares almost nothing.
//   - A manifest costs about 36 bytes per chunk compressed (56 raw; hashes
//     do not compress), and a session start with no page changed uploads
//     only the manifest: for 1 GiB, 582 KB at 64 KiB chunks, 148 KB at
//     256 KiB, 38 KB at 1 MiB (BenchmarkManifest): at 64 KiB a wake
//     of a large database uploads over half a megabyte per GiB.
//   - Each chunk is one PUT when new and one GET when restored: 4,096 per
//     GiB at 256 KiB. Restore fetches them in parallel within a byte
//     budget, so per-request latency is hidden by concurrency, not by
//     size; 256 chunks of 256 KiB in flight fit 64 MiB.
//   - Decoding speed does not depend on the size, nor does encoding of
//     pages that compress; encoding incompressible pages does
//     (BenchmarkChunk, one core of a 2-core Xeon with SHA extensions, best
//     of 5 runs): table-like pages (half compressible) encode at 275-300
//     MB/s and decode at 290-305 MB/s at every size from 64 KiB to 4 MiB;
//     incompressible pages decode at 950-1,080 MB/s at every size (SHA-256
//     and copying), and encode at 265, 580, 860 and 900 MB/s at 64 KiB,
//     256 KiB, 1 MiB and 4 MiB: a fixed cost of about 0.2 ms per object.
//     The manifest of 1 GiB in 256 KiB chunks encodes or decodes in about
//     1.3 ms.
//
// 256 KiB is the smallest of these sizes at which the manifest of a 1 GiB
// database stays well under a megabyte (a wake that changed nothing
// uploads 148 KB), while one changed page costs a quarter of what it costs
// at 1 MiB; it gives up a third of the encoding speed of incompressible
// pages to 1 MiB, on chunks that are encoded only when they changed.
//
// # Gzip file and seal
//
// Every batch, snapshot and manifest, and every chunk written before zstd
// chunk files, is one gzip file of two members:
//
//	content member:
//	+----+----+----+----+----+----+----+----+----+----+
//	| 1f | 8b | 08 | 00 | 00   00   00   00 | 00 | ff |  header, always these 10 bytes:
//	+----+----+----+----+----+----+----+----+----+----+  deflate, no flags, MTIME 0, XFL 0, OS unknown
//	| raw DEFLATE stream (RFC 1951) of the content ... |
//	+----+----+----+----+----+----+----+----+
//	| CRC-32 of content | content length    |          trailer, little-endian, length mod 2^32
//	+----+----+----+----+----+----+----+----+
//	seal member (34 bytes, empty content):
//	+----+----+----+----+----+----+----+----+----+----+----+----+
//	| 1f | 8b | 08 | 04 | 00   00   00   00 | 00 | ff | 0c   00 |  FLG = FEXTRA, XLEN = 12
//	+----+----+----+----+----+----+----+----+----+----+----+----+
//	| 'F'| 'C'| 08   00 | xxhash64 of every byte before the seal|  extra subfield "FC", 8 bytes, LE
//	+----+----+----+----+----+----+----+----+----+----+----+----+
//	| 03   00 | 00   00   00   00   00   00   00   00 |            empty final block, CRC 0, ISIZE 0
//	+----+----+----+----+----+----+----+----+----+----+
//
// Both members are standard gzip (RFC 1952), so gunzip reads the file and
// outputs exactly the content. Why the seal: the content member's CRC-32
// covers the decompressed bytes only, and DEFLATE is not one-to-one: a
// flipped bit in a match distance can point at identical bytes elsewhere and
// decompress to the same content, and padding bits are never read. The seal
// hashes the stored bytes themselves, so any change to the object is
// detected, not only changes that alter its content.
//
// The reader accepts only what the writer makes: exactly these headers, one
// content member, the seal, and nothing after it. The content is untrusted
// until the reader reports io.EOF, which it does only after checking the
// trailer and the seal.
//
// # Rolling checksum
//
// Frames ([SQLitePages].Before and After), snapshots ([SnapshotLane]) and
// manifests ([ManifestLane]) carry the [Checksum] of a database. For a database of n pages of P bytes:
//
//	h(i, page)  = xxhash64( be32(i) || page )        i = 1-based page number
//	checksum    = h(1, page_1) XOR h(2, page_2) XOR ... XOR h(n, page_n)
//
// h is [PageHash]; [DatabaseChecksum] computes the checksum of a whole file.
// An empty database (n = 0) has checksum 0. Pages that exist but were never
// written (a file extended without writing them) count as P zero bytes.
// Because XOR is its own inverse, a write of page i changes the checksum by
// h(i, old) XOR h(i, new) ([Checksum.Replace]), a truncation removes
// h(i, old) for each page cut ([Checksum.Remove]), and an extension adds
// h(i, zeros) for each page not written ([Checksum.Add]): the checksum
// follows a database in O(pages changed), never O(database).
//
// The page number is inside the hash so that two equal pages at different
// numbers do not cancel, and a page moved to another number is detected.
package frames
