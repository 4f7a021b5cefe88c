// Package chunks owns storing an actor's lanes in a bucket as
// content-addressed chunk objects plus the manifest that lists them, and
// loading them back: Write cuts each lane into chunks of
// frames.DefaultChunkPages pages, uploads the chunks the bucket is not
// known to hold and then the manifest; Load rebuilds the lanes in scratch
// files from a manifest, fetching its chunks in parallel within a byte
// budget. The formats are package frames' ("Manifests", "Chunk files").
//
// # Order of writes
//
// A manifest is uploaded last, once every chunk it names is stored (each
// PUT acknowledged), so a manifest in the bucket never names a chunk that
// was not written. Chunks are named by their content, so a chunk already
// stored is never uploaded again: the caller says which chunks the bucket
// holds (Have, from a previous manifest of the actor), and chunks uploaded
// earlier in the same Write count too. What Write uploads is therefore what
// changed since that manifest: a session start that changed nothing
// uploads the manifest alone.
//
// Every page Write reads is checked against its lane's tracker
// (lanes.ReadPages), so a manifest describes exactly the state tracked;
// every chunk Load reads is read to its sealed end and checked against its
// key's hash and its manifest's size (frames.ReadChunkSealed), and each
// lane's pages against the manifest's checksum (lanes.Loader), so a load
// yields the manifest's state or an error naming the manifest (and the
// chunk, for damage the object itself shows): never another database. The
// content's SHA-256 is not recomputed: the manifest's checksum already
// checks every page the chunks hold, and SHA-256 was a fifth of a
// restore's CPU. framectl verify recomputes it (restore.Verify), naming
// the chunk whose content is not what its name says.
//
// # Chunks named unread
//
// Write records each chunk's fingerprint, the XOR of the tracker's page
// hashes over its range. Given the previous manifest (Options.Prior), a
// chunk whose range the tracker fingerprints the same is named without
// reading or hashing its pages: that chunk was named from pages checked
// against a tracker giving the same hashes, so a wake that changed little
// reads only what changed, not the whole database a second time. It is the
// trust a writer already puts in its tracker's checksum when it finds its
// local copy current; a 64-bit fingerprint matching other pages is as
// unlikely as that checksum matching them.
//
// # Loading on first touch
//
// OpenLazy makes a Set at a manifest's state without fetching a chunk
// (lanes.NewLazySet); Touch fetches, verifies as Load does and fills in
// the chunks a frame is about to touch. A compaction that applies a log
// to a large database so fetches the chunks the log touches, and Write,
// given the manifest as its prior, names the others unread (lazy.go).
//
// # Memory
//
// Both directions hold at most Options.MaxInflightBytes of chunks at once
// (DefaultMaxInflightBytes; at least one chunk), whatever the size of the
// database: a fixed number of workers, each with its own buffers, work
// through the chunks. Load keeps 8 bytes per page for the page hashes, as
// any lanes.Set does.
//
// # What it must never do
//
// It never decides what state is current or which manifest to read or
// write (restore, compaction and the replicator do), never deletes an
// object, and never uploads a manifest before the chunks it names.
package chunks
