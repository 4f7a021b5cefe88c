package restore_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	capnp "capnproto.org/go/capnp/v3"
	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	wire "github.com/framectl/framectl/capnp"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/dbtest"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/restore"
)

// manifestsOf reads every snapshot of actor a, each a manifest, by key.
func manifestsOf(t testing.TB, b bucket.Bucket, a frames.Actor) map[string]*frames.Manifest {
	t.Helper()
	inv, err := restore.Take(t.Context(), b, a)
	require.NoError(t, err)
	out := map[string]*frames.Manifest{}
	for _, s := range inv.Sessions {
		for _, o := range s.Snapshots {
			out[o.Key] = buckettest.Manifest(t, b, o.Key)
		}
	}
	return out
}

// toFullSnapshots rewrites the bucket of actor a as framectl wrote it
// before manifests: every manifest replaced by a full snapshot of the same
// state at the same key, and no chunks.
func toFullSnapshots(t testing.TB, b bucket.Bucket, a frames.Actor) {
	t.Helper()
	ctx := t.Context()
	for key, m := range manifestsOf(t, b, a) {
		set, _, err := chunks.Load(ctx, b, a, key, m, t.TempDir(), chunks.Options{})
		require.NoError(t, err)
		var buf bytes.Buffer
		_, err = set.WriteSnapshot(ctx, &buf, m.Epoch, frames.WriteOptions{})
		require.NoError(t, err)
		require.NoError(t, set.Close())
		put(t, b, key, buf.Bytes())
	}
	require.NoError(t, b.DeleteMany(ctx, buckettest.Keys(t, b, a.ChunkPrefix())))
}

// TestRestoreFromFullSnapshots restores every point of the current session
// of a bucket in the format framectl wrote before manifests (full
// snapshots, no chunks), by frame and by time: each restore is
// byte-identical to the database at that point, and verify finds it clean.
func TestRestoreFromFullSnapshots(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			w := newWorkload(t, b, "full-snapshots", 5, 1024)
			for range scaled(3) {
				w.durableOps(8)
			}
			// Big enough that session 2's first snapshot is several chunks'
			// worth.
			w.exec(0, "INSERT INTO t(a,b) SELECT 1, randomblob(1500) FROM generate_series(1,400)")
			w.durable()
			first := len(w.points)
			w.newSession(2)
			for i := range scaled(6) {
				w.durableOps(1 + i%3*4)
			}
			w.closeDB()
			toFullSnapshots(t, b, w.actor)
			inv, err := restore.Take(t.Context(), b, w.actor)
			require.NoError(t, err)
			require.Empty(t, inv.Chunks)
			require.Empty(t, inv.Unknown)

			last := w.points[len(w.points)-1]
			res, got := restoreTo(t, b, w.actor, restore.Latest())
			dbtest.SameBytes(t, "latest", got, last.data)
			require.Equal(t, last.seq, res.Seq)
			require.Nil(t, res.Manifest, "restored from a full snapshot")
			for _, p := range w.points[first:] {
				_, got := restoreTo(t, b, w.actor, restore.ToSeq(p.seq))
				dbtest.SameBytes(t, fmt.Sprintf("frame %d", p.seq), got, p.data)
				_, got = restoreTo(t, b, w.actor, restore.AtTime(p.time))
				dbtest.SameBytes(t, fmt.Sprintf("time of frame %d", p.seq), got, p.data)
			}

			rep, err := restore.Verify(t.Context(), b, w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
			require.NoError(t, err)
			require.False(t, rep.Damaged(), "%v", rep.Problems)
			for _, p := range rep.Problems {
				require.Equal(t, restore.KindStray, p.Kind, "%s", p)
				require.Equal(t, frames.Epoch(1), p.Epoch, "only the superseded session: %s", p)
			}
			objects := 1 // own.json
			for _, s := range inv.Sessions {
				objects += len(s.Snapshots) + len(s.Batches)
			}
			require.Equal(t, objects, rep.Objects)
			require.Equal(t, last.seq, rep.Seq)
		})
	}
}

// TestVerifyReadsEveryChunkOnce: verify of a bucket of manifests reads
// every chunk once (those the replay loaded are not read again) and finds
// it clean.
func TestVerifyReadsEveryChunkOnce(t *testing.T) {
	b := buckettest.Dir(t)
	w := newWorkload(t, b, "verify-chunks", 6, 1024)
	w.ops(8)
	w.exec(0, "INSERT INTO t(a,b) SELECT 1, randomblob(1500) FROM generate_series(1,400)")
	w.durable()
	w.newSession(2)
	w.durableOps(8)
	w.closeDB()
	inv, err := restore.Take(t.Context(), b, w.actor)
	require.NoError(t, err)
	require.Greater(t, len(inv.Chunks), 2)
	rep, err := restore.Verify(t.Context(), b, w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Problems)
	objects := len(inv.Chunks) + 1 // own.json
	for _, s := range inv.Sessions {
		objects += len(s.Snapshots) + len(s.Batches)
	}
	require.Equal(t, objects, rep.Objects, "every chunk is read once, every batch and manifest once")
}

// chunkedBucket is a workload of two sessions whose snapshots are
// manifests, with its latest state and manifests.
type chunkedBucket struct {
	b         bucket.Bucket
	w         *workload
	want      []byte
	manifests map[string]*frames.Manifest
	newest    string // the current session's manifest
	oldest    string // the superseded session's
}

func newChunkedBucket(t *testing.T, b bucket.Bucket) *chunkedBucket {
	w := newWorkload(t, b, "chunk-damage", 11, 1024)
	w.ops(10)
	// About 600 KiB: session 2's first snapshot has three chunks or more.
	w.exec(0, "INSERT INTO t(a,b) SELECT 1, randomblob(1000) FROM generate_series(1,600)")
	w.durable()
	w.newSession(2)
	w.durableOps(20)
	w.closeDB()
	c := &chunkedBucket{b: b, w: w, want: w.points[len(w.points)-1].data, manifests: manifestsOf(t, b, w.actor)}
	for k, m := range c.manifests {
		if m.Epoch == 2 {
			c.newest = k
		} else {
			c.oldest = k
		}
	}
	require.NotEmpty(t, c.newest)
	require.NotEmpty(t, c.oldest)
	return c
}

// chunkOf returns the key of a chunk manifest key names and, if only is
// set, that no other manifest names.
func (c *chunkedBucket) chunkOf(t *testing.T, key string, only bool) string {
	t.Helper()
	others := chunks.Have{}
	for k, m := range c.manifests {
		if k != key {
			for h, n := range chunks.HaveOf(m) {
				others[h] = n
			}
		}
	}
	for _, l := range c.manifests[key].Lanes {
		for _, ch := range l.Chunks {
			if _, shared := others[ch.Hash]; !only || !shared {
				return c.w.actor.ChunkKey(ch.Hash)
			}
		}
	}
	t.Fatalf("manifest %s names no chunk of its own", key)
	return ""
}

func (c *chunkedBucket) verify(t *testing.T) restore.Report {
	t.Helper()
	rep, err := restore.Verify(t.Context(), c.b, c.w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
	require.NoError(t, err)
	return rep
}

// damageOn returns the damage problems of rep.
func damageOn(rep restore.Report) []restore.Problem {
	var out []restore.Problem
	for _, p := range rep.Problems {
		if p.Severity == restore.Damage {
			out = append(out, p)
		}
	}
	return out
}

// TestChunkDamage damages one chunk at a time, in ways a bucket loses
// data: verify names the chunk and the manifest that needs it, a restore
// that needs it fails naming both and leaves the destination alone, and a
// restore that does not need it is unaffected.
func TestChunkDamage(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			c := newChunkedBucket(t, be.New(t))
			ctx := t.Context()
			read := func(key string) []byte {
				data, _, err := bucket.ReadAll(ctx, c.b, key, 1<<30)
				require.NoError(t, err)
				return data
			}
			victim := c.chunkOf(t, c.newest, true)
			orig := read(victim)
			var other string // another chunk of the newest manifest, for the swap
			for _, l := range c.manifests[c.newest].Lanes {
				for _, ch := range l.Chunks {
					if k := c.w.actor.ChunkKey(ch.Hash); k != victim && other == "" {
						other = k
					}
				}
			}
			cases := []struct {
				name   string
				data   []byte // nil: deleted
				kind   restore.Kind
				target error
			}{
				{"flip", func() []byte { d := bytes.Clone(orig); d[len(d)/3] ^= 0x40; return d }(), restore.KindCorrupt, frames.ErrCorrupt},
				{"truncate", orig[:len(orig)-9], restore.KindTruncated, frames.ErrTruncated},
				{"delete", nil, restore.KindMissing, chunks.ErrMissing},
			}
			require.NotEmpty(t, other, "the newest manifest has one chunk: nothing to swap with")
			cases = append(cases, struct {
				name   string
				data   []byte
				kind   restore.Kind
				target error
			}{"swap", read(other), restore.KindCorrupt, frames.ErrCorrupt})
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					if tc.data == nil {
						require.NoError(t, c.b.Delete(ctx, victim))
					} else {
						put(t, c.b, victim, tc.data)
					}
					defer put(t, c.b, victim, orig)

					rep := c.verify(t)
					dmg := damageOn(rep)
					require.Len(t, dmg, 1, "%v", rep.Problems)
					require.Equal(t, victim, dmg[0].Key)
					require.Equal(t, tc.kind, dmg[0].Kind)
					require.Contains(t, dmg[0].Message, c.newest)
					require.ErrorIs(t, rep.Err(), restore.ErrDamage)

					dest := filepath.Join(t.TempDir(), "restored.db")
					require.NoError(t, os.WriteFile(dest, []byte("keep me"), 0o644))
					_, err := restore.Restore(ctx, c.b, c.w.actor, dest, restore.Options{})
					require.ErrorIs(t, err, tc.target)
					require.NotErrorIs(t, err, bucket.ErrNotFound)
					require.ErrorContains(t, err, victim)
					require.ErrorContains(t, err, c.newest)
					kept, rerr := os.ReadFile(dest)
					require.NoError(t, rerr)
					require.Equal(t, "keep me", string(kept), "the destination is left alone")
				})
			}

			// A chunk whose sealed header names the victim's hash over
			// another chunk's pages: only a writer that lied makes one.
			// Verify names it; the restore, which leaves the content's hash
			// to the manifest's checksum, fails on the checksum, naming the
			// manifest, and writes nothing.
			t.Run("lie", func(t *testing.T) {
				put(t, c.b, victim, lyingChunk(t, read(other), victim))
				defer put(t, c.b, victim, orig)
				rep := c.verify(t)
				dmg := damageOn(rep)
				require.NotEmpty(t, dmg, "%v", rep.Problems)
				require.Equal(t, victim, dmg[0].Key)
				require.Equal(t, restore.KindCorrupt, dmg[0].Kind)
				dest := filepath.Join(t.TempDir(), "restored.db")
				_, err := restore.Restore(ctx, c.b, c.w.actor, dest, restore.Options{})
				require.ErrorIs(t, err, lanes.ErrChecksum)
				require.ErrorContains(t, err, c.newest)
				_, err = os.Stat(dest)
				require.ErrorIs(t, err, os.ErrNotExist)
			})

			// A chunk only the superseded session's manifest names: damage
			// for verify, nothing for a restore of the latest state.
			old := c.chunkOf(t, c.oldest, true)
			restoreOld := hide(t, c.b, old)
			rep := c.verify(t)
			dmg := damageOn(rep)
			require.Len(t, dmg, 1, "%v", rep.Problems)
			require.Equal(t, old, dmg[0].Key)
			require.Equal(t, restore.KindMissing, dmg[0].Kind)
			require.Contains(t, dmg[0].Message, c.oldest)
			_, got := restoreTo(t, c.b, c.w.actor, restore.Latest())
			dbtest.SameBytes(t, "latest", got, c.want)
			restoreOld()

			// A chunk no manifest names is a warning only.
			var stray bytes.Buffer
			h, _, err := frames.WriteChunk(&stray, bytes.Repeat([]byte{7}, 1024), frames.WriteOptions{})
			require.NoError(t, err)
			strayKey := c.w.actor.ChunkKey(h.Hash)
			put(t, c.b, strayKey, stray.Bytes())
			rep = c.verify(t)
			require.False(t, rep.Damaged(), "%v", rep.Problems)
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Key == strayKey && p.Kind == restore.KindStray && p.Severity == restore.Warning)
			}
			require.True(t, found, "no warning for the stray chunk: %v", rep.Problems)

			// Within the grace it is no problem, only counted: a manifest
			// in flight may name it, and no collector takes it yet. Past
			// the grace, it is a warning again.
			strayOf := func(rep restore.Report) []restore.Problem {
				var out []restore.Problem
				for _, p := range rep.Problems {
					if p.Key == strayKey {
						out = append(out, p)
					}
				}
				return out
			}
			opts := restore.VerifyOptions{ScratchDir: t.TempDir(), ChunkGrace: time.Hour}
			rep, err = restore.Verify(ctx, c.b, c.w.actor, opts)
			require.NoError(t, err)
			require.Empty(t, strayOf(rep), "a chunk within the grace reported")
			require.Positive(t, rep.ChunksWithinGrace)
			opts.Now = buckettest.NewClock(time.Now().Add(time.Hour + time.Minute)).Now
			rep, err = restore.Verify(ctx, c.b, c.w.actor, opts)
			require.NoError(t, err)
			ps := strayOf(rep)
			require.Len(t, ps, 1, "%v", rep.Problems)
			require.Equal(t, restore.Warning, ps[0].Severity)
			require.Equal(t, restore.KindStray, ps[0].Kind)
			require.Contains(t, ps[0].Message, "more than the grace (1h0m0s) ago")
			require.Zero(t, rep.ChunksWithinGrace)
			require.False(t, rep.Damaged(), "%v", rep.Problems)
		})
	}
}

// gzipChunk encodes content as a gzip chunk file (chunk format version 1),
// as framectl wrote chunks before zstd chunk files, built here from the
// format's description (frames' doc.go, "Chunk files", "Gzip file and
// seal") rather than by the writer, which no longer makes them.
func gzipChunk(t testing.TB, content []byte) []byte {
	t.Helper()
	msg, seg, err := capnp.NewMessage(capnp.SingleSegment(nil))
	require.NoError(t, err)
	ch, err := wire.NewRootChunkHeader(seg)
	require.NoError(t, err)
	ch.SetVersion(wire.ChunkFormatVersion)
	ch.SetByteLength(uint64(len(content)))
	sum := frames.SumChunk(content)
	require.NoError(t, ch.SetHash(sum[:]))
	hdr, err := msg.Marshal()
	require.NoError(t, err)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // MTIME 0, XFL 0, OS 255: framectl's header
	zw.Write(hdr)
	zw.Write(content)
	require.NoError(t, zw.Close())
	seal := xxhash.Sum64(buf.Bytes())
	buf.Write([]byte{0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 12, 0, 'F', 'C', 8, 0})
	buf.Write(binary.LittleEndian.AppendUint64(nil, seal))
	buf.Write([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	return buf.Bytes()
}

// A bucket whose manifests name chunks of both formats, zstd and gzip (as
// written before zstd chunk files, under the same keys: a key is the
// content's hash, whatever the file's format), restores every point of
// its current session byte for byte, verifies clean, and a new session on
// it writes a manifest that still names the gzip chunks it kept.
func TestRestoreFromGzipChunks(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			b := be.New(t)
			w := newWorkload(t, b, "gzip-chunks", 6, 1024)
			w.exec(0, "INSERT INTO t(a,b) SELECT 1, randomblob(1500) FROM generate_series(1,400)")
			w.durable()
			first := len(w.points)
			for i := range scaled(6) {
				w.durableOps(1 + i%3*4)
			}
			w.closeDB()
			ctx := t.Context()
			rewritten := map[string]bool{}
			for i, key := range buckettest.Keys(t, b, w.actor.ChunkPrefix()) {
				if i%2 == 1 {
					continue
				}
				rc, _, err := b.Get(ctx, key)
				require.NoError(t, err)
				_, content, err := frames.ReadChunk(rc, key, 0, nil, frames.Limits{})
				rc.Close()
				require.NoError(t, err)
				put(t, b, key, gzipChunk(t, content))
				rewritten[key] = true
			}
			named := 0
			for _, m := range manifestsOf(t, b, w.actor) {
				for _, l := range m.Lanes {
					for _, c := range l.Chunks {
						if rewritten[w.actor.ChunkKey(c.Hash)] {
							named++
						}
					}
				}
			}
			require.NotZero(t, named, "no manifest names a gzip chunk")

			last := w.points[len(w.points)-1]
			_, got := restoreTo(t, b, w.actor, restore.Latest())
			dbtest.SameBytes(t, "latest", got, last.data)
			for _, p := range w.points[first:] {
				_, got := restoreTo(t, b, w.actor, restore.ToSeq(p.seq))
				dbtest.SameBytes(t, fmt.Sprintf("frame %d", p.seq), got, p.data)
			}
			rep, err := restore.Verify(ctx, b, w.actor, restore.VerifyOptions{ScratchDir: t.TempDir()})
			require.NoError(t, err)
			require.False(t, rep.Damaged(), "%v", rep.Problems)

			// The next session reuses the gzip chunks it finds, as they are.
			w.newSession(2)
			w.durableOps(3)
			w.closeDB()
			kept := 0
			for key := range rewritten {
				rc, _, err := b.Get(ctx, key)
				require.NoError(t, err)
				head := make([]byte, 2)
				_, err = io.ReadFull(rc, head)
				rc.Close()
				require.NoError(t, err)
				if bytes.Equal(head, []byte{0x1f, 0x8b}) {
					kept++
				}
			}
			require.Equal(t, len(rewritten), kept, "gzip chunks rewritten or deleted by the next session")
			last = w.points[len(w.points)-1]
			_, got = restoreTo(t, b, w.actor, restore.Latest())
			dbtest.SameBytes(t, "latest of session 2", got, last.data)
		})
	}
}

// listedKeys records every key a bucket's List returns.
type listedKeys struct {
	bucket.Bucket
	mu   sync.Mutex
	keys []string
}

func (l *listedKeys) List(ctx context.Context, prefix, startAfter string, limit int) (bucket.Page, error) {
	p, err := l.Bucket.List(ctx, prefix, startAfter, limit)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range p.Objects {
		l.keys = append(l.keys, o.Key)
	}
	return p, err
}

// A restore lists no chunk: it reads those its manifest names by name,
// and an actor's chunks list first, thousands per GiB.
func TestRestoreListsNoChunk(t *testing.T) {
	c := newChunkedBucket(t, buckettest.Dir(t))
	lb := &listedKeys{Bucket: c.b}
	_, got := restoreTo(t, lb, c.w.actor, restore.Latest())
	dbtest.SameBytes(t, "latest", got, c.want)
	require.NotEmpty(t, lb.keys)
	for _, k := range lb.keys {
		require.False(t, strings.HasPrefix(k, c.w.actor.ChunkPrefix()), "restore listed %s", k)
	}
}

// lyingChunk rewrites the zstd chunk file data so that its header names
// the hash of key's chunk, sealed again (frames' doc.go, "Chunk files"):
// sound in every way but the content's SHA-256.
func lyingChunk(t testing.TB, data []byte, key string) []byte {
	t.Helper()
	k, err := frames.ParseKey(key)
	require.NoError(t, err)
	require.Equal(t, uint32(0x184D2A50), binary.LittleEndian.Uint32(data), "a zstd chunk file")
	n := int(binary.LittleEndian.Uint32(data[4:]))
	_, content, err := frames.ReadChunk(bytes.NewReader(data), "", 0, nil, frames.Limits{})
	require.NoError(t, err)
	own := frames.SumChunk(content)
	hdr := bytes.Replace(bytes.Clone(data[8:8+n]), own[:], k.Chunk[:], 1)
	require.NotEqual(t, data[8:8+n], hdr, "the header holds the content's hash")
	body := append(append(bytes.Clone(data[:8]), hdr...), data[8+n:len(data)-18]...)
	seal := binary.LittleEndian.AppendUint32(nil, 0x184D2A5F)
	seal = binary.LittleEndian.AppendUint32(seal, 10)
	seal = append(seal, 'F', 'C')
	seal = binary.LittleEndian.AppendUint64(seal, xxhash.Sum64(body))
	return append(body, seal...)
}
