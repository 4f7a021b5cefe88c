package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newDir(t *testing.T) (*bucket.Dir, string) {
	t.Helper()
	root := t.TempDir()
	d, err := bucket.NewDir(root)
	require.NoError(t, err)
	return d, root
}

// files lists the regular files under root, relative, with slashes.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// TestDirLayout: objects are plain files holding exactly their bytes; no
// temporary file survives a put; deleting the last key under a directory
// removes the directory.
func TestDirLayout(t *testing.T) {
	d, root := newDir(t)
	put(t, d, "a/b/c", "abc")
	put(t, d, "a/d", "ad")
	put(t, d, "a/d", "ad2")
	got, want := files(t, root), []string{".framectl/lock", "a/b/c", "a/d"}
	require.Equal(t, want, got, "files")
	data, err := os.ReadFile(filepath.Join(root, "a", "d"))
	require.NoError(t, err, "a/d on disk")
	require.Equal(t, "ad2", string(data), "a/d on disk")
	del(t, d, "a/b/c")
	_, err = os.Stat(filepath.Join(root, "a", "b"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a/b left behind")
	del(t, d, "a/d")
	_, err = os.Stat(filepath.Join(root, "a"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a left behind")
	_, err = os.Stat(root)
	require.NoError(t, err, "the root itself must stay")
}

// TestDirReservedHidden: the reserved directory and its files never show
// in a listing, whatever the prefix.
func TestDirReservedHidden(t *testing.T) {
	d, root := newDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, ".framectl", "tmp", "put-123"), []byte("x"), 0o644))
	put(t, d, ".framectl2", "x")
	put(t, d, "a/.framectl", "x")
	for _, prefix := range []string{"", ".", ".f", ".framectl", ".framectl/", ".framectl/tmp/"} {
		var got []string
		for o, err := range bucket.All(t.Context(), d, prefix) {
			require.NoError(t, err)
			got = append(got, o.Key)
		}
		for _, k := range got {
			if k == ".framectl" || strings.HasPrefix(k, ".framectl/") {
				t.Fatalf("prefix %q listed reserved %q", prefix, k)
			}
		}
		if prefix == "" && !slices.Equal(got, []string{".framectl2", "a/.framectl"}) {
			t.Fatalf("list: %q", got)
		}
	}
}

// TestDirListStaysInside: a prefix that no key can have lists nothing,
// rather than a directory outside the root.
func TestDirListStaysInside(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	require.NoError(t, os.WriteFile(filepath.Join(parent, "outside"), []byte("x"), 0o644))
	d, err := bucket.Open(t.Context(), "file://"+root)
	require.NoError(t, err)
	for _, prefix := range []string{"../", "../o", "/", "//", "a/../../", "./"} {
		p := listPage(t, d, prefix, "", 0)
		require.Len(t, p.Objects, 0, "prefix %q listed", prefix)
	}
}

// TestDirLeftoverDirectories: empty directories (a crash between creating
// a key's parents and renaming it into place) are not keys: not listed, not
// found, and no obstacle to putting their name.
func TestDirLeftoverDirectories(t *testing.T) {
	d, root := newDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "e", "f", "g"), 0o755))
	p := listPage(t, d, "", "", 0)
	require.Len(t, p.Objects, 0, "empty directories listed")
	_, err := d.Stat(t.Context(), "e")
	require.ErrorIs(t, err, bucket.ErrNotFound, "stat e")
	_, err = d.Put(t.Context(), "e", strings.NewReader("e"), 1, bucket.Condition{IfAbsent: true})
	require.NoError(t, err, "put e over empty directories")
	got, _ := mustGet(t, d, "e")
	require.Equal(t, "e", got, "e")
}

// TestDirSymlinksSkipped: the bucket never makes symbolic links, and lists
// none that someone else made.
func TestDirSymlinksSkipped(t *testing.T) {
	d, root := newDir(t)
	put(t, d, "real", "x")
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	require.Equal(t, []string{"real"}, keysOf(listAll(t, d, "", "", 0)), "list")
	_, _, err := d.Get(t.Context(), "link")
	wantErr(t, err, bucket.ErrNotFound, "get", "link")
	_, err = d.Stat(t.Context(), "link")
	wantErr(t, err, bucket.ErrNotFound, "stat", "link")
}

// TestDirNoBucket: once the root is gone, every operation says so.
func TestDirNoBucket(t *testing.T) {
	d, root := newDir(t)
	put(t, d, "k", "v")
	require.NoError(t, os.RemoveAll(root))
	ctx := t.Context()
	_, _, err := d.Get(ctx, "k")
	wantErr(t, err, bucket.ErrNoBucket, "get", "k")
	_, err = d.Stat(ctx, "k")
	wantErr(t, err, bucket.ErrNoBucket, "stat", "k")
	for _, cond := range []bucket.Condition{{}, {IfAbsent: true}, {IfMatch: "x"}} {
		_, err = d.Put(ctx, "k", strings.NewReader("v"), 1, cond)
		wantErr(t, err, bucket.ErrNoBucket, "put", "k")
	}
	_, err = d.List(ctx, "p/", "", 0)
	wantErr(t, err, bucket.ErrNoBucket, "list", "p/")
	wantErr(t, d.Delete(ctx, "k"), bucket.ErrNoBucket, "delete", "k")
	wantErr(t, d.DeleteMany(ctx, []string{"k"}), bucket.ErrNoBucket, "delete", "k")
	_, err = os.Stat(root)
	require.ErrorIs(t, err, fs.ErrNotExist, "an operation re-created the root")
	_, err = bucket.NewDir(root)
	require.ErrorIs(t, err, bucket.ErrNoBucket, "NewDir of a missing directory")
}

// TestDirStaleTemps: opening a bucket removes temporary files crashed
// writers left, and only old ones (a live writer's file is recent).
func TestDirStaleTemps(t *testing.T) {
	_, root := newDir(t)
	tmp := filepath.Join(root, ".framectl", "tmp")
	old, fresh := filepath.Join(tmp, "put-old"), filepath.Join(tmp, "put-fresh")
	for _, p := range []string{old, fresh} {
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	}
	long := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(old, long, long))
	_, err := bucket.NewDir(root)
	require.NoError(t, err)
	_, err = os.Stat(old)
	assert.ErrorIs(t, err, fs.ErrNotExist, "stale temporary file kept")
	_, err = os.Stat(fresh)
	assert.NoError(t, err, "fresh temporary file removed")
}

// TestDirETagsNeverRepeat rewrites one key, with the same size every time
// and often within one tick of the kernel's clock, and deletes and
// re-creates it: no two versions share an ETag, so a compare-and-swap on an
// old version can never succeed against a newer one.
//
// It runs on tmpfs too when /dev/shm exists: without fsync costs, puts are
// fast enough there for many versions per tick of the kernel's clock.
func TestDirETagsNeverRepeat(t *testing.T) {
	roots := map[string]string{"tempdir": t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "framectl-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			roots["tmpfs"] = shm
		}
	}
	for name, root := range roots {
		t.Run(name, func(t *testing.T) {
			d, err := bucket.NewDir(root)
			require.NoError(t, err)
			testETagsNeverRepeat(t, d)
		})
	}
}

func testETagsNeverRepeat(t *testing.T, d *bucket.Dir) {
	// Concurrent writers: their bodies are written and fsynced in
	// parallel, then committed back to back, many versions per tick.
	const writers, writes = 8, 50
	etags := make([][]string, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				etags[w] = append(etags[w], put(t, d, "c", fmt.Sprintf("%04d", i%2)).ETag)
			}
		})
	}
	wg.Wait()
	versions := map[string]bool{}
	for _, es := range etags {
		for _, e := range es {
			if versions[e] {
				t.Fatalf("two versions share the ETag %s", e)
			}
			versions[e] = true
		}
	}

	seen := map[string]int{}
	for i := range 500 {
		body := fmt.Sprintf("%08d", i%3) // few distinct contents, one size
		info := put(t, d, "k", body)
		if j, dup := seen[info.ETag]; dup {
			t.Fatalf("version %d has the ETag of version %d: %s", i, j, info.ETag)
		}
		seen[info.ETag] = i
		if s, err := d.Stat(t.Context(), "k"); err != nil || s.ETag != info.ETag {
			t.Fatalf("version %d: stat %+v %v, put %+v", i, s, err, info)
		}
		if i%5 == 4 {
			del(t, d, "k")
		}
	}
}

// TestDirListRandom compares listings of random keys over a small alphabet
// (rich in '!', '-', '.' and '/') with sorting, for random prefixes,
// start-after points and page sizes.
func TestDirListRandom(t *testing.T) {
	d, _ := newDir(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "!-./0Aa"
	randKey := func() string {
		n := 1 + rng.IntN(7)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	// Collect valid keys of which none is a "directory" of another.
	var keys []string
	conflicts := func(k string) bool {
		for _, o := range keys {
			if k == o || strings.HasPrefix(k, o+"/") || strings.HasPrefix(o, k+"/") {
				return true
			}
		}
		return false
	}
	for len(keys) < 200 {
		k := randKey()
		if bucket.CheckKey(k) == nil && !conflicts(k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		put(t, d, k, k)
	}
	slices.Sort(keys)
	for range 300 {
		prefix, after := randKey(), randKey()
		if rng.IntN(3) == 0 {
			prefix = ""
		}
		if rng.IntN(3) == 0 {
			after = ""
		}
		prefix = prefix[:rng.IntN(len(prefix)+1)]
		limit := rng.IntN(10)
		want := []string{} // keysOf returns an empty slice, not nil
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) && k > after {
				want = append(want, k)
			}
		}
		require.Equal(t, want, keysOf(listAll(t, d, prefix, after, limit)), "list %q after %q limit %d", prefix, after, limit)
	}
}

// parkPut starts a Put of key through d that stops inside its commit at
// point (see SetTestHook), holding the key's lock, until finish is called;
// finish returns the put's result. The test hook is removed once the put
// has returned.
func parkPut(t *testing.T, d *bucket.Dir, key, point string) (parked <-chan struct{}, finish func() (bucket.Info, error)) {
	t.Helper()
	p, r := make(chan struct{}), make(chan struct{})
	var parking atomic.Bool // only the first to lock parks: another may get in where exclusion is broken
	bucket.SetTestHook(func(at, k string) {
		if at == point && k == key && parking.CompareAndSwap(false, true) {
			close(p)
			<-r
		}
	})
	type result struct {
		info bucket.Info
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := d.Put(context.Background(), key, strings.NewReader("parked"), 6, bucket.Condition{})
		done <- result{info, err}
	}()
	var res *result
	finish = func() (bucket.Info, error) {
		if res == nil {
			close(r)
			v := <-done
			res = &v
			bucket.SetTestHook(nil)
		}
		return res.info, res.err
	}
	t.Cleanup(func() { finish() })
	return p, finish
}

// A writer that holds a key's lock and does not let go (a process stopped
// mid-Put, here a goroutine parked in the commit) makes others wait for
// that key only until their context ends; they go on once it is free.
// Another Dir on the same root in this process is excluded too.
func TestDirLockHonoursContext(t *testing.T) {
	d, root := newDir(t)
	other, err := bucket.NewDir(root)
	require.NoError(t, err)
	parked, finish := parkPut(t, d, "k", "locked")
	<-parked
	for _, b := range []*bucket.Dir{d, other} {
		for _, cond := range []bucket.Condition{{}, {IfAbsent: true}} {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			_, err := b.Put(ctx, "k", strings.NewReader("v"), 1, cond)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("put %+v under a held lock: %v, want the context's deadline", cond, err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		err := b.Delete(ctx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("delete under a held lock: %v, want the context's deadline", err)
		}
	}
	_, err = d.Stat(t.Context(), "k")
	require.ErrorIs(t, err, bucket.ErrNotFound, "k exists before the parked put went")
	if info, err := finish(); err != nil {
		t.Fatalf("the parked put: %v", err)
	} else if got, gi := mustGet(t, d, "k"); got != "parked" || gi.ETag != info.ETag {
		t.Fatalf("k after the parked put: %q %+v, put %+v", got, gi, info)
	}
	for _, b := range []*bucket.Dir{d, other} {
		_, err := b.Put(t.Context(), "k", strings.NewReader("v"), 1, bucket.Condition{})
		require.NoError(t, err)
	}
}

// Keys share directories but not locks: deleting the last key of a
// directory removes it while puts of its siblings are creating it or about
// to rename into it. Each goroutine creates, checks and deletes keys of
// its own in shared directories, at two depths, through two Dirs on one
// root: every put succeeds and every object reads back until deleted.
func TestDirSiblingCreateDelete(t *testing.T) {
	d, root := newDir(t)
	other, err := bucket.NewDir(root)
	require.NoError(t, err)
	const goroutines, rounds = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		b := []*bucket.Dir{d, other}[g%2]
		wg.Go(func() {
			ctx := t.Context()
			for r := range rounds {
				key := fmt.Sprintf("s/%d", g)
				if (g+r)%2 == 0 {
					key = fmt.Sprintf("s/a/b/%d", g)
				}
				body := fmt.Sprintf("%d.%d", g, r)
				cond := bucket.Condition{IfAbsent: r%3 != 0}
				if _, err := b.Put(ctx, key, strings.NewReader(body), int64(len(body)), cond); err != nil {
					errs <- fmt.Errorf("round %d: %w", r, err)
					return
				}
				rc, _, err := b.Get(ctx, key)
				if err == nil {
					var sb strings.Builder
					_, err = io.Copy(&sb, rc)
					rc.Close()
					if err == nil && sb.String() != body {
						err = fmt.Errorf("%s holds %q, want %q", key, sb.String(), body)
					}
				}
				if err == nil {
					err = b.Delete(ctx, key)
				}
				if err == nil {
					if _, serr := b.Stat(ctx, key); !errors.Is(serr, bucket.ErrNotFound) {
						err = fmt.Errorf("stat %s after delete: %v", key, serr)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("round %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, []string{".framectl/lock"}, files(t, root), "left behind")
	_, err = os.Stat(filepath.Join(root, "s"))
	require.ErrorIs(t, err, fs.ErrNotExist, "empty directory s left behind")
}

// "p" and "p/q" cannot both exist, and when puts of both race, exactly one
// wins and the other is ErrKeyConflict; deletes of a third key beside
// them remove and recreate their directories meanwhile.
func TestDirKeyConflictRace(t *testing.T) {
	d, root := newDir(t)
	other, err := bucket.NewDir(root)
	require.NoError(t, err)
	ctx := t.Context()
	for _, pair := range [][2]string{{"p", "p/q"}, {"x/p", "x/p/q/r"}} {
		wins := map[string]int{}
		for r := range 150 {
			keys := pair
			if r%2 == 1 {
				keys[0], keys[1] = keys[1], keys[0] // who starts first
			}
			start := make(chan struct{})
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, key := range keys {
				b := []*bucket.Dir{d, other}[i]
				cond := bucket.Condition{IfAbsent: r%3 != 0}
				wg.Go(func() {
					<-start
					_, errs[i] = b.Put(ctx, key, strings.NewReader(key), int64(len(key)), cond)
				})
			}
			wg.Go(func() { // a sibling's create and delete empty x/ and p/
				<-start
				for _, k := range []string{"x/sib", "p/sib"} {
					if _, err := d.Put(ctx, k, strings.NewReader("s"), 1, bucket.Condition{}); err != nil && !errors.Is(err, bucket.ErrKeyConflict) {
						t.Errorf("put %s: %v", k, err)
					}
					assert.NoError(t, d.Delete(ctx, k), "delete %s", k)
				}
			})
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner < 0:
					winner = i
				case err == nil:
					t.Fatalf("round %d: both %s and %s were stored: %q", r, keys[0], keys[1], keysOf(listAll(t, d, "", "", 0)))
				case !errors.Is(err, bucket.ErrKeyConflict):
					t.Fatalf("round %d: put %s: %v, want success or ErrKeyConflict", r, keys[i], err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: neither %s nor %s was stored: %v", r, keys[0], keys[1], errs)
			}
			require.Equal(t, []string{keys[winner]}, keysOf(listAll(t, d, "", "", 0)), "round %d: %s won, the bucket holds", r, keys[winner])
			wins[keys[winner]]++
			del(t, d, keys[winner])
		}
		t.Logf("%v", wins)
	}
}

// A Delete removes the directory a Put of a sibling has created and is
// about to rename into: the Put makes the directory again and succeeds.
func TestDirDeleteRemovesSiblingsDirectory(t *testing.T) {
	d, root := newDir(t)
	put(t, d, "d/e/old", "old")
	parked, finish := parkPut(t, d, "d/e/new", "renaming")
	<-parked
	del(t, d, "d/e/old") // the last file in d/e: d/e and d go
	_, err := os.Stat(filepath.Join(root, "d"))
	require.ErrorIs(t, err, fs.ErrNotExist, "d not removed under the parked put")
	info, err := finish()
	require.NoError(t, err, "put of a sibling whose directory was removed")
	if got, gi := mustGet(t, d, "d/e/new"); got != "parked" || gi.ETag != info.ETag {
		t.Fatalf("d/e/new: %q %+v, put %+v", got, gi, info)
	}
	require.Equal(t, []string{"d/e/new"}, keysOf(listAll(t, d, "", "", 0)), "list")
}

// A Put of "p" removes the empty directory p that a Put of "p/q" has made
// and is about to rename into: "p" wins, "p/q" is ErrKeyConflict, and the
// loser, undoing its directories, removes none of the winner's files.
func TestDirKeyConflictMidCommit(t *testing.T) {
	for _, c := range []struct{ winner, loser string }{{"p", "p/q"}, {"x/p", "x/p/q/r"}} {
		t.Run(c.winner, func(t *testing.T) {
			d, _ := newDir(t)
			parked, finish := parkPut(t, d, c.loser, "renaming")
			<-parked
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if _, err := d.Put(ctx, c.winner, strings.NewReader("won"), 3, bucket.Condition{IfAbsent: true}); err != nil {
				t.Fatalf("put %s over the empty directory of a commit under way: %v", c.winner, err)
			}
			_, err := finish()
			wantErr(t, err, bucket.ErrKeyConflict, "put", c.loser)
			got, _ := mustGet(t, d, c.winner)
			require.Equal(t, "won", got, "%s", c.winner)
			require.Equal(t, []string{c.winner}, keysOf(listAll(t, d, "", "", 0)), "list")
		})
	}
}
