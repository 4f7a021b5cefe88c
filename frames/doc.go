// Package frames owns the bytes framectl puts in a bucket: batch files and
// snapshot files (gzip around Cap'n Proto messages), the object key layout and
// its number encodings, and the rolling database checksum that chains frames
// together.
//
// Everything read from a bucket is untrusted. Every decoder here is bounded
// (Limits): message size, pointer traversal and depth, decompressed size, list
// lengths are all checked before anything is allocated on their account, the
// gzip header and trailer are checked exactly, trailing bytes are rejected, and
// unknown union tags are errors rather than panics. A damaged object yields an
// *Error naming the object key and what is wrong, matching ErrCorrupt,
// ErrTruncated, ErrTooLarge or ErrUnknownKind with errors.Is.
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
package frames
