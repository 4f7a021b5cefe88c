package bucket_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backend is one implementation the contract suite runs against.
type backend struct {
	name string
	new  func(testing.TB) bucket.Bucket
	// faulty: operations may fail with ErrInjected (before reaching the
	// store, or after a put landed). The suite then does what a real
	// client does: retries, and reads back after an ambiguous conditional
	// put. It asserts what must hold regardless.
	faulty bool
}

// contractFaults are the faults the faulty backends inject: enough to hit
// every ambiguous path in every test, with listings kept exact (Lag is
// tested on its own in faulty_test.go).
func contractFaults(t testing.TB) buckettest.FaultConfig {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return buckettest.FaultConfig{
		Seed:             h.Sum64(), // reproducible per test
		ErrorRate:        0.1,
		LostResponseRate: 0.1,
		MaxLatency:       200 * time.Microsecond,
	}
}

func backends() []backend {
	return []backend{
		{name: "dir", new: buckettest.Dir},
		{name: "s3", new: buckettest.S3},
		{name: "faulty-dir", faulty: true, new: func(t testing.TB) bucket.Bucket {
			return buckettest.NewFaulty(buckettest.Dir(t), contractFaults(t))
		}},
		{name: "faulty-s3", faulty: true, new: func(t testing.TB) bucket.Bucket {
			return buckettest.NewFaulty(buckettest.S3(t), contractFaults(t))
		}},
	}
}

// TestContract runs the one contract suite against every backend.
func TestContract(t *testing.T) {
	cases := []struct {
		name string
		run  func(*testing.T, backend)
	}{
		{"RoundTrip", testRoundTrip},
		{"InvalidKeys", testInvalidKeys},
		{"PutArguments", testPutArguments},
		{"ShortBody", testShortBody},
		{"Order", testOrder},
		{"ManyKeys", testManyKeys},
		{"TreeOrder", testTreeOrder},
		{"ManyKeysOneLevel", testManyKeysOneLevel},
		{"CreateOnlyRace", testCreateOnlyRace},
		{"CompareAndSwap", testCompareAndSwap},
		{"CASCounter", testCASCounter},
		{"NoTornContent", testNoTornContent},
		{"KeyConflict", testKeyConflict},
		{"DeleteMany", testDeleteMany},
		{"ReadAll", testReadAll},
	}
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			be.new(t) // skips (or fails on CI) here, once, if the server is missing
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, be) })
			}
		})
	}
}

// ---- client helpers: what a real client does on a faulty bucket

// maxAttempts bounds retries of injected faults; at the suite's rates a
// run of this many is impossible (0.2^50).
const maxAttempts = 50

// retry calls op until it fails with something other than ErrInjected.
func retry[T any](t testing.TB, op func() (T, error)) (T, error) {
	t.Helper()
	for i := 1; ; i++ {
		v, err := op()
		if !errors.Is(err, buckettest.ErrInjected) || i == maxAttempts {
			return v, err
		}
	}
}

func put(t testing.TB, b bucket.Bucket, key, body string) bucket.Info {
	t.Helper()
	info, err := retry(t, func() (bucket.Info, error) {
		return b.Put(t.Context(), key, strings.NewReader(body), int64(len(body)), bucket.Condition{})
	})
	require.NoError(t, err, "put %s", key)
	return info
}

// get reads a whole object, retrying injected faults.
func get(t testing.TB, b bucket.Bucket, key string) (string, bucket.Info, error) {
	t.Helper()
	type res struct {
		body string
		info bucket.Info
	}
	r, err := retry(t, func() (res, error) {
		rc, info, err := b.Get(t.Context(), key)
		if err != nil {
			return res{}, err
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		return res{string(data), info}, err
	})
	return r.body, r.info, err
}

func mustGet(t testing.TB, b bucket.Bucket, key string) (string, bucket.Info) {
	t.Helper()
	body, info, err := get(t, b, key)
	require.NoError(t, err, "get %s", key)
	return body, info
}

func stat(t testing.TB, b bucket.Bucket, key string) (bucket.Info, error) {
	t.Helper()
	return retry(t, func() (bucket.Info, error) { return b.Stat(t.Context(), key) })
}

func del(t testing.TB, b bucket.Bucket, key string) {
	t.Helper()
	_, err := retry(t, func() (struct{}, error) { return struct{}{}, b.Delete(t.Context(), key) })
	require.NoError(t, err, "delete %s", key)
}

func listPage(t testing.TB, b bucket.Bucket, prefix, startAfter string, limit int) bucket.Page {
	t.Helper()
	p, err := retry(t, func() (bucket.Page, error) { return b.List(t.Context(), prefix, startAfter, limit) })
	require.NoError(t, err, "list %q after %q", prefix, startAfter)
	return p
}

// listAll pages through a listing and checks each page's shape: full pages
// while More, keys in order.
func listAll(t testing.TB, b bucket.Bucket, prefix, startAfter string, limit int) []bucket.Info {
	t.Helper()
	want := limit
	if want <= 0 {
		want = bucket.DefaultPageSize
	}
	var all []bucket.Info
	for after := startAfter; ; {
		p := listPage(t, b, prefix, after, limit)
		if p.More && len(p.Objects) != want {
			t.Fatalf("list %q after %q limit %d: %d keys with More (want full pages)", prefix, after, limit, len(p.Objects))
		}
		if len(p.Objects) > want {
			t.Fatalf("list %q after %q limit %d: %d keys", prefix, after, limit, len(p.Objects))
		}
		for i, o := range p.Objects {
			if o.Key <= after || (i > 0 && o.Key <= p.Objects[i-1].Key) {
				t.Fatalf("list %q after %q limit %d: %q out of order", prefix, after, limit, o.Key)
			}
		}
		all = append(all, p.Objects...)
		if !p.More {
			return all
		}
		after = p.Objects[len(p.Objects)-1].Key
	}
}

func keysOf(infos []bucket.Info) []string {
	keys := make([]string, len(infos))
	for i, o := range infos {
		keys[i] = o.Key
	}
	return keys
}

// condPut is a conditional put as a careful client makes it: injected
// faults are retried, and an ErrPrecondition after an ambiguous attempt
// (one whose response may have been lost after it landed) is resolved by
// reading the key: bodies are unique, so the content says who won.
//
// It returns nil if this put is what the key now holds (or held: callers
// race only in ways where a landed put is not overwritten before the read),
// ErrPrecondition if it lost, and any other error as is. ambiguous reports
// whether the outcome needed the read.
func condPut(t testing.TB, b bucket.Bucket, key, body string, cond bucket.Condition) (ambiguous bool, err error) {
	t.Helper()
	for i := 0; i < maxAttempts; i++ {
		_, err = b.Put(t.Context(), key, strings.NewReader(body), int64(len(body)), cond)
		switch {
		case errors.Is(err, buckettest.ErrInjected):
			ambiguous = true
			continue
		case errors.Is(err, bucket.ErrPrecondition) && ambiguous:
			got, _, gerr := get(t, b, key)
			if gerr == nil && got == body {
				return true, nil
			}
			return true, err
		}
		return ambiguous, err
	}
	return ambiguous, err
}

// ---- the cases

func testRoundTrip(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()

	// Missing objects.
	_, _, err := get(t, b, "obj/a")
	wantErr(t, err, bucket.ErrNotFound, "get", "obj/a")
	_, err = stat(t, b, "obj/a")
	wantErr(t, err, bucket.ErrNotFound, "stat", "obj/a")

	// Put, then the same ETag from Get, Stat and List.
	p1 := put(t, b, "obj/a", "hello")
	if p1.Key != "obj/a" || p1.Size != 5 || p1.ETag == "" {
		t.Fatalf("put: %+v", p1)
	}
	body, g1 := mustGet(t, b, "obj/a")
	if body != "hello" || g1.Size != 5 || g1.ETag != p1.ETag || g1.Key != "obj/a" {
		t.Fatalf("get: %q %+v, put said %+v", body, g1, p1)
	}
	s1, err := stat(t, b, "obj/a")
	if err != nil || s1.Size != 5 || s1.ETag != p1.ETag || s1.ModTime.IsZero() {
		t.Fatalf("stat: %+v %v, put said %+v", s1, err, p1)
	}
	l := listAll(t, b, "obj/", "", 0)
	if len(l) != 1 || l[0].Key != "obj/a" || l[0].ETag != p1.ETag || l[0].Size != 5 {
		t.Fatalf("list: %+v, put said %+v", l, p1)
	}

	// Replacing the content changes the ETag, everywhere.
	p2 := put(t, b, "obj/a", "world!")
	if p2.ETag == p1.ETag || p2.Size != 6 {
		t.Fatalf("replaced content: put %+v, first put %+v", p2, p1)
	}
	body, g2 := mustGet(t, b, "obj/a")
	s2, _ := stat(t, b, "obj/a")
	l = listAll(t, b, "obj/", "", 0)
	if body != "world!" || g2.ETag != p2.ETag || s2.ETag != p2.ETag || len(l) != 1 || l[0].ETag != p2.ETag {
		t.Fatalf("after replace: get %q %+v, stat %+v, list %+v, put %+v", body, g2, s2, l, p2)
	}

	// An empty object is an object.
	pe := put(t, b, "obj/empty", "")
	body, ge := mustGet(t, b, "obj/empty")
	if body != "" || ge.Size != 0 || ge.ETag != pe.ETag {
		t.Fatalf("empty object: %q %+v, put %+v", body, ge, pe)
	}

	// Delete; deleting again, or something never there, is not an error.
	del(t, b, "obj/a")
	del(t, b, "obj/a")
	del(t, b, "obj/never")
	_, err = stat(t, b, "obj/a")
	wantErr(t, err, bucket.ErrNotFound, "stat", "obj/a")
	_, _, err = get(t, b, "obj/a")
	wantErr(t, err, bucket.ErrNotFound, "get", "obj/a")
	l = listAll(t, b, "obj/", "", 0)
	require.Len(t, l, 1, "list after delete")
	require.Equal(t, "obj/empty", l[0].Key, "list after delete")

	// A body of unknown size (-1) streams.
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	info, err := retry(t, func() (bucket.Info, error) {
		return b.Put(ctx, "obj/stream", io.MultiReader(bytes.NewReader(data)), -1, bucket.Condition{})
	})
	require.NoError(t, err, "put of unknown size")
	body, gs := mustGet(t, b, "obj/stream")
	require.Equal(t, info.ETag, gs.ETag, "put of unknown size: stat %+v, put %+v", gs, info)
	require.Equal(t, int64(len(data)), gs.Size, "put of unknown size: stat %+v, put %+v", gs, info)
	// 64 KiB: a diff of the bodies would drown the message.
	if body != string(data) {
		t.Fatalf("put of unknown size: the %d bytes read back differ from the %d put", len(body), len(data))
	}

	if b.String() == "" {
		t.Error("String is empty")
	}
}

// wantErr checks that err wraps want and is an *Error naming op and key.
func wantErr(t testing.TB, err, want error, op, key string) {
	t.Helper()
	require.ErrorIs(t, err, want, "%s %q", op, key)
	var e *bucket.Error
	require.ErrorAs(t, err, &e, "%s %q", op, key)
	require.Equal(t, op, e.Op, "%s %q: the operation the error names", op, key)
	require.Equal(t, key, e.Key, "%s %q: the key the error names", op, key)
}

func testInvalidKeys(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()
	bad := []string{
		"", "/a", "a/", "a//b", "/", ".", "..", "./a", "a/.", "a/./b", "a/../b", "a/..",
		"a\x00b", "\xff", strings.Repeat("x", bucket.MaxKeyComponentLen+1), "a/" + strings.Repeat("y", bucket.MaxKeyComponentLen+1),
		strings.Repeat("ab/", 400) + "c", ".framectl", ".framectl/x",
		// Windows separators: a directory bucket there would leave its root.
		`back\slash`, `..\..\x`, `a/..\..\..\x`, `\`, `a\`,
	}
	for _, key := range bad {
		_, err := retry(t, func() (bucket.Info, error) {
			return b.Put(ctx, key, strings.NewReader("x"), 1, bucket.Condition{})
		})
		wantErr(t, err, bucket.ErrInvalidKey, "put", key)
		_, _, err = get(t, b, key)
		wantErr(t, err, bucket.ErrInvalidKey, "get", key)
		_, err = stat(t, b, key)
		wantErr(t, err, bucket.ErrInvalidKey, "stat", key)
		_, err = retry(t, func() (struct{}, error) { return struct{}{}, b.Delete(ctx, key) })
		wantErr(t, err, bucket.ErrInvalidKey, "delete", key)
	}
	// Unusual but valid keys work everywhere.
	good := []string{
		strings.Repeat("x", bucket.MaxKeyComponentLen), "sp ace", "tab\there", "é/ü/漢字", "a/.framectl",
		".framectl2", ".hidden", "a/b.", "-", "!", "a=b&c?d#e", "100%", "x+y",
	}
	for _, key := range good {
		put(t, b, key, "first")
		put(t, b, key, "v:"+key) // overwriting takes a different path on versitygw
		body, _ := mustGet(t, b, key)
		require.Equal(t, "v:"+key, body, "key %q: read", key)
	}
	want := slices.Clone(good)
	slices.Sort(want)
	require.Equal(t, want, keysOf(listAll(t, b, "", "", 0)), "list of unusual keys")
}

func testPutArguments(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()
	// A conditional put needs an exact size; conditions exclude each other.
	for _, c := range []struct {
		name string
		size int64
		cond bucket.Condition
	}{
		{"IfAbsent with size -1", -1, bucket.Condition{IfAbsent: true}},
		{"IfMatch with size -1", -1, bucket.Condition{IfMatch: "abc"}},
		{"IfAbsent and IfMatch", 1, bucket.Condition{IfAbsent: true, IfMatch: "abc"}},
		{"IfMatch *", 1, bucket.Condition{IfMatch: "*"}},
		{"size -2", -2, bucket.Condition{}},
	} {
		_, err := retry(t, func() (bucket.Info, error) { return b.Put(ctx, "args", strings.NewReader("x"), c.size, c.cond) })
		var e *bucket.Error
		if err == nil || errors.Is(err, bucket.ErrPrecondition) || !errors.As(err, &e) || e.Key != "args" {
			t.Errorf("%s: got %v, want an argument error for key args", c.name, err)
		}
	}
	_, err := stat(t, b, "args")
	assert.ErrorIs(t, err, bucket.ErrNotFound, "refused puts stored something")
}

func testShortBody(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()
	// A body shorter than its size is an error and stores nothing.
	_, err := retry(t, func() (bucket.Info, error) {
		return b.Put(ctx, "short", strings.NewReader("abc"), 10, bucket.Condition{})
	})
	require.Error(t, err, "short body accepted")
	if _, err := stat(t, b, "short"); !errors.Is(err, bucket.ErrNotFound) {
		t.Fatalf("short body stored: %v", err)
	}
	// Replacing an object with a short body leaves the old one whole.
	put(t, b, "short", "original")
	for _, cond := range []bucket.Condition{{}, {IfAbsent: true}} {
		_, err = retry(t, func() (bucket.Info, error) {
			return b.Put(ctx, "short", strings.NewReader("abc"), 10, cond)
		})
		require.Error(t, err, "short body accepted (%+v)", cond)
	}
	body, _ := mustGet(t, b, "short")
	require.Equal(t, "original", body, "after failed puts")
}

// orderKeys exercise byte order: '!' < '-' < '.' < '/' < digits < upper <
// lower case. No key is a "directory" of another.
var orderKeys = []string{
	"!", "-x", ".x", "0", "9/z", "A", "B/c", "Z", "a!", "a-c", "a.b", "a/a", "a/b!x", "a/b-",
	"a/b.", "a/b0", "a/bb", "a0", "ab", "b", "c/d!e", "c/d-e", "c/d.e", "c/d/e", "c/d/f/g",
	"c/d0", "do/ns/aa/x", "do/ns/ac", "do/ns/ac-1", "do/ns/ac.b", "do/ns/acz/y", "do/ns/ad", "z",
}

func testOrder(t *testing.T, be backend) {
	b := be.new(t)
	var wg sync.WaitGroup
	for _, k := range orderKeys {
		wg.Go(func() { put(t, b, k, k) })
	}
	wg.Wait()
	sorted := slices.Clone(orderKeys)
	slices.Sort(sorted)
	require.Equal(t, orderKeys, sorted, "test keys not in byte order")

	expect := func(prefix, after string) []string {
		out := []string{} // keysOf returns an empty slice, not nil
		for _, k := range orderKeys {
			if strings.HasPrefix(k, prefix) && k > after {
				out = append(out, k)
			}
		}
		return out
	}
	prefixes := []string{"", "a", "a/", "a/b", "c/d", "c/d/", "do/ns/ac", "do/ns/a", "B", "zz", "a/b/", ".", "/", "do//"}
	for _, prefix := range prefixes {
		for _, limit := range []int{0, 1, 2, 5} {
			got := keysOf(listAll(t, b, prefix, "", limit))
			assert.Equal(t, expect(prefix, ""), got, "list %q limit %d", prefix, limit)
		}
	}
	// StartAfter at every key and between keys, alone and with prefixes.
	afters := append(slices.Clone(orderKeys), "", "a", "a/", "a/b", "c/d", "c/d/", "c/d/f", "do/ns/ac/", "~", "\u00ff")
	for _, after := range afters {
		for _, prefix := range []string{"", "a", "c/d", "do/ns/ac"} {
			got := keysOf(listAll(t, b, prefix, after, 3))
			assert.Equal(t, expect(prefix, after), got, "list %q after %q", prefix, after)
		}
	}
	// ETag and size in listings are those of the objects.
	for _, o := range listAll(t, b, "c/", "", 0) {
		s, err := stat(t, b, o.Key)
		assert.NoError(t, err, "listed %+v, stat %+v", o, s)
		assert.Equal(t, o.ETag, s.ETag, "listed %+v, stat %+v", o, s)
		assert.Equal(t, int64(len(o.Key)), o.Size, "listed %+v, stat %+v", o, s)
	}
}

func manyKey(i int) string { return fmt.Sprintf("m/%02x/%d", i%37, i) }

func testManyKeys(t *testing.T, be backend) {
	const n = 2100
	b := be.new(t)
	want := make([]string, n)
	for i := range n {
		want[i] = manyKey(i)
	}
	// The listing is under test here, not the puts: on a faulty backend the
	// fixture goes in behind the faults.
	store := unwrap(b)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				put(t, store, manyKey(i), strconv.Itoa(i))
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	slices.Sort(want)

	// The default page is 1,000 keys, like S3's.
	var sizes []int
	var mores []bool
	for after := ""; ; {
		p := listPage(t, b, "m/", after, 0)
		sizes = append(sizes, len(p.Objects))
		mores = append(mores, p.More)
		if !p.More {
			break
		}
		after = p.Objects[len(p.Objects)-1].Key
	}
	if !slices.Equal(sizes, []int{1000, 1000, 100}) || !slices.Equal(mores, []bool{true, true, false}) {
		t.Fatalf("default pages: sizes %v more %v, want [1000 1000 100] [true true false]", sizes, mores)
	}
	for _, limit := range []int{0, 7, 1000, 1500, 2100, 5000} {
		got := keysOf(listAll(t, b, "m/", "", limit))
		require.Equal(t, want, got, "limit %d: %d keys, want %d, first difference at %d", limit, len(got), len(want), firstDiff(got, want))
	}
	// Exactly 2,100 remain after the first page of 2,100: More is exact.
	if p := listPage(t, b, "m/", "", n); p.More || len(p.Objects) != n {
		t.Fatalf("limit %d: %d keys, More %v", n, len(p.Objects), p.More)
	}
	if p := listPage(t, b, "m/", "", n-1); !p.More || len(p.Objects) != n-1 {
		t.Fatalf("limit %d: %d keys, More %v", n-1, len(p.Objects), p.More)
	}
	// A mid-component prefix.
	var sub []string
	for _, k := range want {
		if strings.HasPrefix(k, "m/0") {
			sub = append(sub, k)
		}
	}
	got := keysOf(listAll(t, b, "m/0", "", 100))
	require.Equal(t, sub, got, "prefix m/0: %d keys, want %d", len(got), len(sub))
	// bucket.All walks every page. It stops at the first error, so it runs
	// behind the faults.
	var all []string
	for o, err := range bucket.All(t.Context(), unwrap(b), "m/") {
		require.NoError(t, err)
		all = append(all, o.Key)
	}
	require.Equal(t, want, all, "All: %d keys, want %d", len(all), len(want))
}

// treeKeys is a tree of keys whose components are prefixes of their
// siblings ("a", "a!", "a-", "a.", "a0", "a~"), as files at one level and
// directories at another, down to five levels: across a directory
// boundary, the order of full keys differs from the order of names
// ("a-" < "a/x" < "a0"). No key is a "directory" of another.
func treeKeys(rng *rand.Rand, n int) []string {
	comps := []string{"a", "a!", "a-", "a.", "a0", "a~", "b", "-", "~"}
	var keys []string
	conflicts := func(k string) bool {
		for _, o := range keys {
			if k == o || strings.HasPrefix(k, o+"/") || strings.HasPrefix(o, k+"/") {
				return true
			}
		}
		return false
	}
	for len(keys) < n {
		parts := make([]string, 1+rng.IntN(5))
		for i := range parts {
			parts[i] = comps[rng.IntN(len(comps))]
		}
		if k := "t/" + strings.Join(parts, "/"); !conflicts(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// testTreeOrder lists a tree of tricky names from every key, from every
// directory on the way to one (with and without its slash) and from
// points between keys, under prefixes that end inside components and at
// directory boundaries, and compares each page with the sorted keys.
func testTreeOrder(t *testing.T, be backend) {
	b := be.new(t)
	rng := rand.New(rand.NewPCG(7, 11))
	keys := treeKeys(rng, 150)
	store := unwrap(b)
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() { put(t, store, k, k) })
	}
	wg.Wait()
	expect := func(prefix, after string, limit int) []string {
		out := []string{}
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) && k > after && len(out) < limit {
				out = append(out, k)
			}
		}
		return out
	}
	// Where a listing may start: at a key, in the directories above it,
	// just before and after it, at a component cut short.
	startSet := map[string]bool{"": true, "t": true, "t/": true, "s": true, "u": true}
	for _, k := range keys {
		startSet[k] = true
		startSet[k+"!"] = true
		startSet[k+"/"] = true
		startSet[k[:len(k)-1]] = true
		for i := range len(k) {
			if k[i] == '/' {
				startSet[k[:i]] = true
				startSet[k[:i+1]] = true
			}
		}
	}
	starts := slices.Sorted(maps.Keys(startSet))
	// One page of three from every start: where each page begins and
	// whether More is right.
	for _, after := range starts {
		want := expect("t/", after, 4)
		p := listPage(t, b, "t/", after, 3)
		if got := keysOf(p.Objects); !slices.Equal(got, want[:min(3, len(want))]) || p.More != (len(want) == 4) {
			t.Fatalf("list t/ after %q limit 3: %q More %v, want %q More %v", after, got, p.More, want[:min(3, len(want))], len(want) == 4)
		}
	}
	// Whole listings under prefixes that end at directories and inside
	// components, from random starts, in pages of every size.
	prefixSet := map[string]bool{"": true}
	for _, k := range keys {
		for i := range len(k) + 1 {
			prefixSet[k[:i]] = true
		}
	}
	prefixes := slices.Sorted(maps.Keys(prefixSet))
	for range 150 {
		prefix := prefixes[rng.IntN(len(prefixes))]
		after := starts[rng.IntN(len(starts))]
		limit := rng.IntN(8)
		got := keysOf(listAll(t, b, prefix, after, limit))
		require.Equal(t, expect(prefix, after, len(keys)), got, "list %q after %q limit %d", prefix, after, limit)
	}
}

// testManyKeysOneLevel pages through more than 1,000 keys in one
// directory, among them names that are prefixes of others and
// subdirectories sorting between files ("12" < "12-" < "12.d/k" < "120"):
// full pages with More until the last, each key once, none missed, from
// the start and from points between keys.
func testManyKeysOneLevel(t *testing.T, be backend) {
	var want []string
	for i := range 1200 {
		want = append(want, fmt.Sprintf("f/%d", i))
		if i%10 == 2 {
			want = append(want, fmt.Sprintf("f/%d-", i), fmt.Sprintf("f/%d.d/k", i))
		}
	}
	slices.Sort(want)
	b := be.new(t)
	store := unwrap(b)
	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for k := range work {
				put(t, store, k, k)
			}
		})
	}
	for _, k := range want {
		work <- k
	}
	close(work)
	wg.Wait()

	var got []string
	var sizes []int
	for after := ""; ; {
		p := listPage(t, b, "f/", after, 0)
		got = append(got, keysOf(p.Objects)...)
		sizes = append(sizes, len(p.Objects))
		if !p.More {
			break
		}
		after = p.Objects[len(p.Objects)-1].Key
	}
	require.Equal(t, []int{1000, len(want) - 1000}, sizes, "default page sizes")
	require.Equal(t, want, got, "all pages: first difference at %d", firstDiff(got, want))
	for _, after := range []string{"f/", "f/1", "f/12", "f/12-", "f/12.d", "f/12.d/", "f/12.d/k", "f/599~", "f/999", "f/999~"} {
		i, _ := slices.BinarySearch(want, after)
		if i < len(want) && want[i] == after {
			i++
		}
		got := keysOf(listAll(t, b, "f/", after, 700))
		require.Equal(t, want[i:], got, "after %q: first difference at %d", after, firstDiff(got, want[i:]))
	}
	// The last page ends exactly at the last key: no More.
	last := want[len(want)-101]
	if p := listPage(t, b, "f/", last, 100); p.More || len(p.Objects) != 100 || p.Objects[99].Key != want[len(want)-1] {
		t.Fatalf("after %q limit 100: %d keys, More %v", last, len(p.Objects), p.More)
	}
}

// unwrap returns the bucket behind a Faulty one.
func unwrap(b bucket.Bucket) bucket.Bucket {
	if f, ok := b.(*buckettest.Faulty); ok {
		return f.Inner()
	}
	return b
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testCreateOnlyRace(t *testing.T, be backend) {
	const writers, rounds = 32, 8
	b := be.new(t)
	for r := range rounds {
		key := fmt.Sprintf("race/%d", r)
		errs := make([]error, writers)
		ambiguous := make([]bool, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				ambiguous[w], errs[w] = condPut(t, b, key, fmt.Sprintf("writer %d round %d", w, r), bucket.Condition{IfAbsent: true})
			})
		}
		close(start)
		wg.Wait()

		var winners []int
		for w, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, w)
			case errors.Is(err, bucket.ErrPrecondition):
			default:
				t.Fatalf("round %d writer %d: %v", r, w, err)
			}
		}
		body, _ := mustGet(t, b, key)
		var stored int
		_, err := fmt.Sscanf(body, "writer %d round", &stored)
		require.NoError(t, err, "round %d: stored %q", r, body)
		if len(winners) != 1 || winners[0] != stored {
			t.Fatalf("round %d: winners %v, stored %q", r, winners, body)
		}
		if !be.faulty {
			for w := range writers {
				if ambiguous[w] {
					t.Fatalf("round %d writer %d: ambiguous outcome on a clean bucket", r, w)
				}
			}
		}
	}
}

func testCompareAndSwap(t *testing.T, be backend) {
	b := be.new(t)
	v1 := put(t, b, "cas", "v1")

	// The current ETag wins.
	if _, err := condPut(t, b, "cas", "v2", bucket.Condition{IfMatch: v1.ETag}); err != nil {
		t.Fatalf("CAS with the current ETag: %v", err)
	}
	body, v2 := mustGet(t, b, "cas")
	if body != "v2" || v2.ETag == v1.ETag {
		t.Fatalf("after CAS: %q %+v (before %+v)", body, v2, v1)
	}
	// A stale one loses, and changes nothing.
	_, err := condPut(t, b, "cas", "v3", bucket.Condition{IfMatch: v1.ETag})
	wantErr(t, err, bucket.ErrPrecondition, "put", "cas")
	if body, now := mustGet(t, b, "cas"); body != "v2" || now.ETag != v2.ETag {
		t.Fatalf("stale CAS changed the object: %q %+v", body, now)
	}
	// So does one that was never an ETag.
	_, err = condPut(t, b, "cas", "v3", bucket.Condition{IfMatch: "0123456789abcdef0123456789abcdef"})
	wantErr(t, err, bucket.ErrPrecondition, "put", "cas")
	// CAS on an absent key fails and creates nothing.
	_, err = condPut(t, b, "cas-absent", "x", bucket.Condition{IfMatch: v2.ETag})
	wantErr(t, err, bucket.ErrPrecondition, "put", "cas-absent")
	_, err = stat(t, b, "cas-absent")
	require.ErrorIs(t, err, bucket.ErrNotFound, "CAS on an absent key")
	// Create-only on an existing key fails and changes nothing.
	_, err = condPut(t, b, "cas", "v4", bucket.Condition{IfAbsent: true})
	wantErr(t, err, bucket.ErrPrecondition, "put", "cas")
	body, _ = mustGet(t, b, "cas")
	require.Equal(t, "v2", body, "create-only overwrote")
	// After a delete, create-only works again and a CAS on the old ETag fails.
	del(t, b, "cas")
	_, err = condPut(t, b, "cas", "v2", bucket.Condition{IfMatch: v2.ETag})
	wantErr(t, err, bucket.ErrPrecondition, "put", "cas")
	_, err = condPut(t, b, "cas", "v5", bucket.Condition{IfAbsent: true})
	require.NoError(t, err, "create-only after delete")
}

// testCASCounter increments a counter from several goroutines with
// compare-and-swap. The counter is one entry per goroutine, "w0=3,w1=5",
// that only its goroutine changes: after an ambiguous put, a goroutine
// learns whether it landed by reading its own entry, so increments are
// exactly-once even with lost responses. A lost update (a CAS that wrongly
// succeeded over someone else's write) shows as an entry going backwards.
func testCASCounter(t *testing.T, be backend) {
	const workers, incs = 4, 25
	b := be.new(t)
	put(t, b, "counter", "")
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := 1; n <= incs; n++ {
				for attempt := 0; ; attempt++ {
					if attempt == 10000 {
						t.Errorf("worker %d: increment %d made no progress", w, n)
						return
					}
					body, info, err := get(t, b, "counter")
					if err != nil {
						t.Errorf("worker %d: get: %v", w, err)
						return
					}
					m := parseCounter(body)
					if m[w] < n-1 {
						t.Errorf("worker %d: lost update: my entry is %d, I had written %d (%q)", w, m[w], n-1, body)
						return
					}
					if m[w] == n {
						break // an earlier ambiguous attempt landed
					}
					m[w] = n
					_, err = b.Put(t.Context(), "counter", strings.NewReader(formatCounter(m)), int64(len(formatCounter(m))), bucket.Condition{IfMatch: info.ETag})
					if err == nil {
						break
					}
					if errors.Is(err, buckettest.ErrInjected) && be.faulty || errors.Is(err, bucket.ErrPrecondition) {
						continue
					}
					t.Errorf("worker %d: put: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	body, _ := mustGet(t, b, "counter")
	m := parseCounter(body)
	total := 0
	for w := range workers {
		assert.Equal(t, incs, m[w], "worker %d: entry", w)
		total += m[w]
	}
	require.Equal(t, workers*incs, total, "counter %q: total", body)
}

func parseCounter(s string) map[int]int {
	m := map[int]int{}
	for f := range strings.SplitSeq(s, ",") {
		var w, n int
		if _, err := fmt.Sscanf(f, "w%d=%d", &w, &n); err == nil {
			m[w] = n
		}
	}
	return m
}

func formatCounter(m map[int]int) string {
	ws := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("w%d=%d", w, m[w])
	}
	return strings.Join(parts, ",")
}

// testNoTornContent replaces a large object again and again while readers
// read it: every read must be one writer's body, whole.
func testNoTornContent(t *testing.T, be backend) {
	const size, writers, writes, readers = 1 << 20, 4, 3, 4
	b := be.new(t)
	body := func(w int) []byte { return bytes.Repeat([]byte{byte('A' + w)}, size) }
	put(t, b, "big", string(body(writers))) // so readers never miss it

	done := make(chan struct{})
	var writersWG, readersWG sync.WaitGroup
	reads := make([]int, readers)
	for r := range readers {
		readersWG.Go(func() {
			for {
				select {
				case <-done:
					if reads[r] > 0 {
						return
					}
				default:
				}
				got, info, err := get(t, b, "big")
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if len(got) != size || info.Size != size || strings.Count(got, got[:1]) != size {
					t.Errorf("reader %d: torn read: %d bytes (info says %d), not all equal to the first", r, len(got), info.Size)
					return
				}
				reads[r]++
			}
		})
	}
	for w := range writers {
		writersWG.Go(func() {
			for range writes {
				put(t, b, "big", string(body(w)))
			}
		})
	}
	writersWG.Wait()
	close(done)
	readersWG.Wait()
	final, _ := mustGet(t, b, "big")
	if len(final) != size || final[0] < 'A' || final[0] >= 'A'+writers || strings.Count(final, final[:1]) != size {
		t.Fatalf("final object is not one writer's body (%d bytes, starts %q)", len(final), final[:1])
	}
}

func testKeyConflict(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()
	try := func(key string, cond bucket.Condition) error {
		_, err := retry(t, func() (bucket.Info, error) {
			return b.Put(ctx, key, strings.NewReader(key), int64(len(key)), cond)
		})
		return err
	}
	// "p" exists: "p/q" (and deeper) cannot.
	put(t, b, "p", "p")
	for _, key := range []string{"p/q", "p/q/r"} {
		for _, cond := range []bucket.Condition{{}, {IfAbsent: true}} {
			wantErr(t, try(key, cond), bucket.ErrKeyConflict, "put", key)
		}
	}
	// "r/s" exists: "r" cannot.
	put(t, b, "r/s", "r/s")
	for _, cond := range []bucket.Condition{{}, {IfAbsent: true}} {
		wantErr(t, try("r", cond), bucket.ErrKeyConflict, "put", "r")
	}
	// A "directory" is not an object.
	_, err := stat(t, b, "r")
	wantErr(t, err, bucket.ErrNotFound, "stat", "r")
	_, _, err = get(t, b, "r")
	wantErr(t, err, bucket.ErrNotFound, "get", "r")
	_, err = condPut(t, b, "r", "r", bucket.Condition{IfMatch: "whatever"})
	if !errors.Is(err, bucket.ErrPrecondition) && !errors.Is(err, bucket.ErrKeyConflict) {
		t.Fatalf("CAS on a directory: %v", err)
	}
	del(t, b, "r") // not an object: nothing happens
	body, _ := mustGet(t, b, "r/s")
	require.Equal(t, "r/s", body, "r/s after deleting r")
	require.Equal(t, []string{"p", "r/s"}, keysOf(listAll(t, b, "", "", 0)), "list")
	// Deleting frees the name, in both directions.
	del(t, b, "p")
	_, err = condPut(t, b, "p/q/r", "p/q/r", bucket.Condition{IfAbsent: true})
	require.NoError(t, err, "p/q/r after deleting p")
	del(t, b, "r/s")
	_, err = condPut(t, b, "r", "r", bucket.Condition{IfAbsent: true})
	require.NoError(t, err, "r after deleting r/s")
	del(t, b, "p/q/r")
	_, err = condPut(t, b, "p", "p", bucket.Condition{IfAbsent: true})
	require.NoError(t, err, "p after deleting p/q/r")
	require.Equal(t, []string{"p", "r"}, keysOf(listAll(t, b, "", "", 0)), "list")
}

func testDeleteMany(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()
	for _, k := range []string{"d/1", "d/2", "d/3/x", "keep"} {
		put(t, b, k, k)
	}
	deleteMany := func(keys []string) error {
		_, err := retry(t, func() (struct{}, error) { return struct{}{}, b.DeleteMany(ctx, keys) })
		return err
	}
	// Missing keys are fine; an invalid key is reported by name after every
	// other key has been tried.
	err := deleteMany([]string{"d/1", "d/missing", "d//bad", "d/2", "d/3/x"})
	wantErr(t, err, bucket.ErrInvalidKey, "delete", "d//bad")
	require.Equal(t, []string{"keep"}, keysOf(listAll(t, b, "", "", 0)), "after DeleteMany")
	require.NoError(t, deleteMany([]string{"d/1", "d/missing"}), "DeleteMany of missing keys")
	require.NoError(t, deleteMany(nil), "DeleteMany of nothing")
	// More keys than one S3 request takes.
	var keys []string
	for i := range 1234 {
		keys = append(keys, fmt.Sprintf("bulk/%04d", i))
	}
	var wg sync.WaitGroup
	for chunk := range slices.Chunk(keys, 100) {
		wg.Go(func() {
			for _, k := range chunk {
				put(t, b, k, "x")
			}
		})
	}
	wg.Wait()
	require.NoError(t, deleteMany(append(keys, "bulk/missing")), "DeleteMany of %d keys", len(keys))
	got := keysOf(listAll(t, b, "", "", 0))
	require.Equal(t, []string{"keep"}, got, "after bulk DeleteMany: %d keys left", len(got))
}

func testReadAll(t *testing.T, be backend) {
	b := be.new(t)
	ctx := t.Context()
	data := strings.Repeat("x", 100)
	p := put(t, b, "ra", data)
	put(t, b, "ra-empty", "")
	readAll := func(key string, limit int64) ([]byte, bucket.Info, error) {
		type res struct {
			data []byte
			info bucket.Info
		}
		r, err := retry(t, func() (res, error) {
			d, i, err := bucket.ReadAll(ctx, b, key, limit)
			return res{d, i}, err
		})
		return r.data, r.info, err
	}
	for _, limit := range []int64{100, 101, 1 << 20} {
		got, info, err := readAll("ra", limit)
		require.NoError(t, err, "ReadAll limit %d: %d bytes %+v", limit, len(got), info)
		require.Equal(t, data, string(got), "ReadAll limit %d: %d bytes %+v", limit, len(got), info)
		require.Equal(t, p.ETag, info.ETag, "ReadAll limit %d: %d bytes %+v", limit, len(got), info)
	}
	for _, limit := range []int64{99, 1, 0} {
		got, _, err := readAll("ra", limit)
		wantErr(t, err, bucket.ErrTooLarge, "get", "ra")
		if got != nil {
			t.Fatalf("ReadAll limit %d returned %d bytes with its error", limit, len(got))
		}
	}
	if got, _, err := readAll("ra-empty", 0); err != nil || len(got) != 0 {
		t.Fatalf("ReadAll of an empty object: %q %v", got, err)
	}
	_, _, err := readAll("ra-missing", 10)
	wantErr(t, err, bucket.ErrNotFound, "get", "ra-missing")
	_, _, err = readAll("ra", -1)
	require.Error(t, err, "ReadAll with a negative limit succeeded")
}
