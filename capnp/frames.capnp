# frames.capnp: the wire schema of everything framectl stores in a bucket
# besides JSON records. Package frames (frames/) is the only reader and writer;
# it documents the file framing (gzip, message order) and every bound it
# enforces while decoding. This file is part of the wire format: never renumber
# a field, never change a type, never reuse a removed ordinal.
#
# Regenerate the Go code with `go generate ./capnp/...` (see gen.go).

@0xfcd4d411d5ef8c4f;

using Go = import "/go.capnp";
$Go.package("capnp");
$Go.import("github.com/framectl/framectl/capnp");

const formatVersion :UInt16 = 1;
# The value of BatchHeader.version and SnapshotHeader.version written today.
# A reader rejects any other value: a newer writer must bump it only when an
# old reader would misread the object.

const manifestFormatVersion :UInt16 = 2;
# The value of Manifest.version: a snapshot object whose only message is a
# Manifest rather than a SnapshotHeader followed by the lanes' bytes (go doc
# ./frames, "Manifests"). Manifest and SnapshotHeader share their first four
# fields, so a reader reads `version` the same way from either and knows
# which it holds; a reader that knows only formatVersion refuses a manifest,
# naming its version.

const chunkFormatVersion :UInt16 = 1;
# The value of ChunkHeader.version in a gzip chunk file, what framectl
# wrote before zstd chunk files (go doc ./frames, "Chunk files"). Chunk
# objects have their own version: they are a different kind of object from
# batches and snapshots, under keys of their own.

const chunkZstdFormatVersion :UInt16 = 2;
# The value of ChunkHeader.version in a zstd chunk file, what framectl
# writes today. Each file format holds only its own version.

enum LaneKind {
  # What a lane holds, and so how a frame changes it.
  unspecified @0;
  # Never written. A decoder rejects it (it is what a zeroed field reads as).
  sqlitePages @1;
  # A SQLite database file, replicated page by page (SqlitePages frames).
}

struct Frame {
  # One change to one lane, written by one epoch, covering the sequence
  # numbers firstSeq..=lastSeq. Sequence numbers count commits per actor and
  # strictly increase across sessions. A frame made by the capture covers one
  # commit (firstSeq == lastSeq); a batch merges a run of commits to one lane
  # into one frame holding the newest version of each page.

  epoch @0 :UInt64;
  # Ownership epoch (the session) that wrote the frame. Equal to the epoch of
  # the batch that carries it.

  firstSeq @1 :UInt64;
  # First sequence number covered (inclusive).

  lastSeq @2 :UInt64;
  # Last sequence number covered (inclusive); >= firstSeq.

  lane @3 :UInt32;
  # The lane changed. Lane 0 is the actor's SQLite database.

  commitTime @4 :Int64;
  # Commit time of the newest commit covered (lastSeq), in Unix nanoseconds,
  # from the writer's wall clock. Used only for point-in-time restore targets.

  union {
    sqlitePages @5 :SqlitePages;
    # Pages written to a sqlitePages lane.

    newLane @6 :LaneKind;
    # Create the lane, empty, with this kind. The lane must not exist.

    initialize @7 :Void;
    # Reset the lane to empty (zero bytes, checksum 0). A new database starts
    # from this frame.

    deleteLane @8 :Void;
    # The lane no longer exists.

    # Ordinals @9 and @10 are reserved for `write` and `consume` frames,
    # kinds a later format version may add.
  }
}

struct SqlitePages {
  # The pages one frame wrote to a SQLite database lane, and the rolling
  # database checksum around them (go doc ./frames, "Rolling checksum").

  pageSize @0 :UInt32;
  # Bytes per page: a power of two from 512 to 65536. Every page's data has
  # exactly this length.

  databasePages @1 :UInt32;
  # Size of the database in pages after the frame. Pages past it are cut off;
  # pages between the old size and this one that the frame does not carry are
  # zero-filled.

  checksumBefore @2 :UInt64;
  # Database checksum before the frame: equal to the previous frame's
  # checksumAfter (or the snapshot's checksum) for the same lane.

  checksumAfter @3 :UInt64;
  # Database checksum after the frame (pages written, size applied).

  pages @4 :List(Page);
  # Page numbers strictly ascending, each in 1..=databasePages.

  continued @5 :Bool;
  # The frame is split over several messages because its pages do not fit one
  # message: true on every part but the last. Each part repeats the frame's
  # other fields unchanged, and page numbers keep ascending across parts. The
  # size and checksumAfter apply once the last part is applied.
}

struct Page {
  number @0 :UInt32;
  # 1-based page number, as SQLite numbers pages.

  data @1 :Data;
  # The page, exactly SqlitePages.pageSize bytes.
}

struct BatchHeader {
  # First message of a batch file (log/<epoch>/<last seq>). The frames
  # follow, one message each, in ascending sequence order, contiguous:
  # each frame's firstSeq is the previous frame's lastSeq + 1, except for the
  # later parts of a continued frame, which repeat the range.

  version @0 :UInt16;
  # formatVersion.

  epoch @1 :UInt64;
  # The epoch that wrote the batch; the <epoch> of its key.

  firstSeq @2 :UInt64;
  # firstSeq of the first frame.

  lastSeq @3 :UInt64;
  # lastSeq of the last frame; the <last seq> of its key.

  frameCount @4 :UInt32;
  # Number of frame messages that follow (each part of a continued frame
  # counts as one message). At least 1.
}

struct SnapshotHeader {
  # First and only message of a snapshot file (snapshot/<epoch>/<seq>).
  # After it come the lanes' bytes, raw, in the order of `lanes`: exactly
  # byteLength bytes for each.

  version @0 :UInt16;
  # formatVersion.

  epoch @1 :UInt64;
  # The epoch that wrote the snapshot; the <epoch> of its key.

  seq @2 :UInt64;
  # The snapshot holds the state after every commit through this sequence
  # number; the <seq> of its key. 0 = before the first commit.

  commitTime @3 :Int64;
  # Commit time of commit `seq` (Unix nanoseconds), 0 when seq is 0.

  lanes @4 :List(SnapshotLane);
  # Lane numbers strictly ascending.
}

struct SnapshotLane {
  lane @0 :UInt32;
  # The lane's number.

  kind @1 :LaneKind;
  # What it holds.

  pageSize @2 :UInt32;
  # For sqlitePages lanes: bytes per page (a power of two, 512..65536).

  byteLength @3 :UInt64;
  # Bytes of the lane that follow the header: a multiple of pageSize.

  checksum @4 :UInt64;
  # Rolling database checksum of those bytes.
}

struct Manifest {
  # First and only message of a manifest: a snapshot object
  # (snapshot/<epoch>/<seq>) that lists the database as chunk objects instead
  # of holding its bytes. Fields @0 to @3 are SnapshotHeader's, with the same
  # ordinals and types, and so at the same offsets of the encoding (Cap'n
  # Proto lays out fields in ordinal order): a reader reads `version` the
  # same way from either and knows which it holds. Never change either
  # struct's first four fields.

  version @0 :UInt16;
  # manifestFormatVersion.

  epoch @1 :UInt64;
  # The epoch that wrote the manifest; the <epoch> of its key.

  seq @2 :UInt64;
  # The manifest holds the state after every commit through this sequence
  # number; the <seq> of its key. 0 = before the first commit.

  commitTime @3 :Int64;
  # Commit time of commit `seq` (Unix nanoseconds), 0 when seq is 0.

  lanes @4 :List(ManifestLane);
  # Lane numbers strictly ascending.

  predecessorEpoch @5 :UInt64;
  # The session's lineage: the epoch of the session whose state this
  # session started from, below `epoch`; 0 when the session started a new
  # database. Every manifest of a session carries the same lineage (a
  # compaction copies it), so it survives the deletion of the session's
  # first manifest.

  predecessorSeq @6 :UInt64;
  # The last sequence number of the predecessor that this session holds, at
  # most `seq`: the predecessor's frames past it are not history. 0 when
  # predecessorEpoch is 0.
}

struct ManifestLane {
  # One lane of a manifest: its bytes are the contents of `chunks`, in order.

  lane @0 :UInt32;
  # The lane's number.

  kind @1 :LaneKind;
  # What it holds.

  pageSize @2 :UInt32;
  # For sqlitePages lanes: bytes per page (a power of two, 512..65536).

  pageCount @3 :UInt32;
  # The lane's size in pages.

  checksum @4 :UInt64;
  # Rolling database checksum of the whole lane (0 when it is empty).

  chunkPages @5 :UInt32;
  # Pages per chunk, at least 1: every chunk holds exactly this many pages
  # except the last, which holds 1 to chunkPages. Chosen by the writer and
  # recorded here, so that no reader assumes it.

  chunks @6 :List(ChunkRef);
  # ceil(pageCount / chunkPages) chunks, covering pages 1..pageCount in
  # order, without gap or overlap.
}

struct ChunkRef {
  # A chunk object of the actor, chunk/<hex of hash>, holding a range of a
  # lane's pages.

  firstPage @0 :UInt32;
  # 1-based number of the chunk's first page in the lane.

  pageCount @1 :UInt32;
  # Pages it holds.

  hash @2 :Data;
  # SHA-256 of the chunk's content (the pages, uncompressed): 32 bytes.

  storedSize @3 :UInt64;
  # Size of the chunk object in the bucket when the manifest was written, for
  # budgets and accounting. Advisory: chunks are shared, and another writer
  # may have stored the same content with other compression.

  fingerprint @4 :UInt64;
  # XOR of the lane's page hashes over the chunk's range, each the hash the
  # rolling database checksum XORs in for that page (page number and
  # content): what a writer's tracker gives for these pages without reading
  # them. A writer whose tracker gives the same value for the same range
  # names the same chunk without reading or hashing it. 0: not recorded
  # (manifests written before it; such a chunk is read and hashed).
}

struct ChunkHeader {
  # First and only message of a chunk object (chunk/<hash>). After it come
  # exactly byteLength bytes of content: whole pages, raw. The object says
  # nothing about what the pages are (lane, page numbers, page size): one
  # chunk serves every manifest range with the same bytes, and the manifest
  # says what they are there.

  version @0 :UInt16;
  # chunkFormatVersion.

  byteLength @1 :UInt64;
  # Bytes of content that follow: a positive multiple of 512, the smallest
  # page size.

  hash @2 :Data;
  # SHA-256 of the bytes that follow: 32 bytes, the <hash> of the key.
}
