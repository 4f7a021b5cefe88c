// Package frames owns the bytes framectl puts in a bucket: batch files and
// snapshot files (gzip around Cap'n Proto messages), the object key layout and
// its number encodings, and the rolling database checksum that chains frames
// together. The formats are drawn below, under Wire format.
//
// Everything read from a bucket is untrusted. Every decoder here is bounded
// ([Limits]): message size, pointer traversal and depth, decompressed size,
// list lengths are all checked before anything is allocated on their account,
// the gzip header and trailer are checked exactly, trailing bytes are
// rejected, and unknown union tags are errors rather than panics. A damaged
// object yields an [*Error] naming the object key and what is wrong, matching
// [ErrCorrupt], [ErrTruncated], [ErrTooLarge] or [ErrUnknownKind] with
// errors.Is.
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
// formatVersion there, and the golden files in frames/testdata/golden pin
// the encoded bytes of this one. The sections below are Object keys, Numbers
// in keys, Batch files, Snapshot files, Gzip file and seal, and Rolling
// checksum.
//
// # Object keys
//
//	do/<namespace>/<actor>/own.json                   ownership record
//	do/<namespace>/<actor>/log/<epoch>/<last seq>     a batch file
//	do/<namespace>/<actor>/snapshot/<epoch>/<seq>     a snapshot file
//	nodes/<node>.json                                 a node's lease
//	alarms/<namespace>/<due>/<actor>.<gen>            an entry of a namespace's alarm index
//
// <namespace> is [NamespaceID](tenant, namespace): 22 characters of unpadded
// base64url. <actor> is the lowercase hex of the actor's ID bytes
// ([ActorKey], 1 to [MaxActorIDBytes] bytes). <epoch> is the ownership
// epoch that wrote the object (the objects of one epoch are its session),
// <last seq> the last sequence number ([Seq]) in the batch, <seq> the
// sequence number the snapshot covers through. <node> is
// 1 to [MaxNodeIDLen] characters of [a-z0-9-] not starting with '-'
// ([ValidNodeID]). [Actor.OwnKey], [Actor.LogKey], [Actor.SnapshotKey],
// [NodeKey] and [Actor.AlarmKey] build keys; [ParseKey] parses them. The
// contents of own.json and of a node's lease belong to package fence.
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
// store keys as files): own.json, log/ and snapshot/ are siblings, and every
// number is a leaf or a directory, never both at one level (an alarm's <due>
// is always a directory, <actor>.<gen> always a leaf).
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
// [NewSnapshotWriter] and read by [NewSnapshotReader]:
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
//   - version is formatVersion; lanes strictly ascending by number, of a
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
// # Gzip file and seal
//
// Every batch and snapshot is one gzip file of two members:
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
// Frames ([SQLitePages].Before and After) and snapshots ([SnapshotLane])
// carry the [Checksum] of a database. For a database of n pages of P bytes:
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
