// Package lanes owns what a frame does to state. A lane is one replicated
// file of an actor; lane 0 (MainLane) is its SQLite database. Only one lane
// kind exists today, sqlitePages: a file of fixed-size pages that frames
// overwrite, grow and truncate page by page.
//
// Three pieces, from the smallest:
//
//   - Tracker follows one lane's rolling checksum (frames.Checksum) without
//     touching a file: it keeps the hash of every page, so overwriting a page
//     updates the checksum in O(1) without reading the old page. The
//     replicator uses it on its own to follow the live database.
//   - A Set is every lane of one actor as files in a scratch directory, plus
//     the last sequence applied (Seq) and its commit time. It is built empty
//     (NewSet), from a snapshot (LoadSnapshot) or from pieces of one that
//     arrive in any order (Loader: the chunks of a manifest), written out
//     as a snapshot (WriteSnapshot, or page by page through ReadPages and
//     Sources) and cross-checked against its files (VerifyFiles). A lazy
//     Set (NewLazySet) starts from a manifest with no page loaded and takes
//     each chunk as a frame is about to touch it (Needs, Fill).
//   - Apply and ReplayBatch move a Set forward frame by frame: frames already
//     covered are skipped, a frame past the next sequence is a gap (ErrGap,
//     naming the missing range), every frame's checksum before must equal the
//     lane's (the chain) and its checksum after must equal the lane's once it
//     is applied.
//
// Restore, compaction, verification and the replicator all build on this
// package, so it is exact (every transition is checked), bounded (nothing is
// allocated or hashed in proportion to what a frame claims rather than what
// it carries: see MaxUnwrittenPages), and fast (one pwrite per run of
// consecutive pages, no allocation per page).
//
// # Memory
//
// A lane costs 8 bytes of memory per page for its page hashes: 2 MiB per GiB
// of database with 4 KiB pages (16 MiB per GiB with 512-byte pages, 128 KiB
// per GiB with 64 KiB pages), and a lazy Set one byte per chunk besides.
// Nothing else grows with the database; copies go through one bounded
// buffer.
//
// # Lane creation
//
// A lane exists once a snapshot, a newLane frame or an initialize frame
// creates it. A sqlitePages frame for a lane that does not exist is corrupt:
// no frame creates a lane implicitly, so a log replayed from nothing must
// begin with initialize or newLane (or start from a snapshot, which lists
// lane 0 even when it is empty). newLane requires that the lane does not
// exist, deleteLane that it does; initialize empties the lane, creating it as
// a sqlitePages lane if it is missing. An empty lane (0 pages) has no fixed
// page size: it takes the page size of the first sqlitePages frame applied to
// it. A lane that holds pages never changes its page size (SQLite cannot
// change it in WAL mode either).
//
// # What it must never do
//
// It never does network I/O or decides which objects to read (restore plans
// that), never applies a frame past a gap, never accepts a frame whose
// checksum before breaks the chain or whose checksum after does not match,
// never writes outside its directory, never allocates or hashes what a frame
// claims rather than carries, and never lets a Set that a failure left
// half-changed look usable: after such a failure every call fails with
// ErrBroken. Frames from a frames.BatchReader are tentative until it reports
// io.EOF, so a Set is scratch state: when ReplayBatch fails after applying
// anything, the caller discards the Set and its directory.
package lanes
