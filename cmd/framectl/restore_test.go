package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/frames"
)

// rows counts the rows of table t in a database file, read-only.
func rows(t *testing.T, path string) int {
	t.Helper()
	u := url.URL{Scheme: "file", Path: path, RawQuery: "vfs=os&mode=ro&immutable=1"}
	c, err := sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	require.NoError(t, err)
	defer c.Close()
	s, _, err := c.Prepare("SELECT count(*) FROM t")
	require.NoError(t, err)
	defer s.Close()
	if !s.Step() {
		t.Fatal(s.Err())
	}
	return s.ColumnInt(0)
}

func TestRestore(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 8)
			out := filepath.Join(t.TempDir(), "restored.db")
			r := runCLI(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "restore", r.stdout, out, "session 1, seq 8")
			contains(t, "progress", r.stderr, "restore "+f.actor.Actor+": 100%")
			wantSameFile(t, f.source, out)

			// Again over the file it wrote, as JSON: nothing on stderr.
			r = runCLI(t, append([]string{"restore", "--out", out, "--json"}, f.actorFlags()...)...).want(t, exitOK)
			rep := jsonOf[restoreReport](t, r)
			assert.Len(t, rep.Restored, 1, "restore --json: %+v", rep)
			assert.Equal(t, frames.Seq(8), rep.Restored[0].Seq, "restore --json: %+v", rep)
			assert.Equal(t, out, rep.Restored[0].Path, "restore --json: %+v", rep)
			assert.Equal(t, "latest", rep.Target, "restore --json: %+v", rep)
			assert.Equal(t, "", r.stderr, "restore --json wrote progress")
			wantSameFile(t, f.source, out)
			// -v: progress on stderr even with --json.
			r = runCLI(t, append([]string{"restore", "--out", out, "--json", "-v"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "restore --json -v", r.stderr, "100%")
			jsonOf[restoreReport](t, r)
		})
	}
}

// Point in time: every commit of the fixture is a batch of its own, so each
// sequence number is a frame boundary restore can stop at.
func TestRestoreToSeq(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 8)
	dir := t.TempDir()
	// Commits: 1 CREATE, 2 INSERT, 3 INSERT, 4 UPDATE, 5 INSERT, ...
	out := filepath.Join(dir, "seq4.db")
	r := runCLI(t, append([]string{"restore", "--out", out, "--to-seq", "4", "--json"}, f.actorFlags()...)...).want(t, exitOK)
	rep := jsonOf[restoreReport](t, r)
	if got := rep.Restored[0]; got.Seq != 4 || got.CommitTime == nil || rep.Target != "seq 4" {
		t.Fatalf("--to-seq 4 reached %+v", got)
	}
	if n := rows(t, out); n != 2 {
		t.Errorf("at seq 4 the table has %d rows, want 2", n)
	}

	// --at the commit time of seq 5 reaches seq 5 (3 rows); a
	// nanosecond earlier, seq 4.
	r = runCLI(t, "inspect", "--bucket", f.url, f.actor.LogKey(1, 5), "--json").want(t, exitOK)
	var ins inspectReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ins))
	at := *ins.Batch.Frames[0].CommitTime
	for _, tc := range []struct {
		at   time.Time
		seq  frames.Seq
		rows int
	}{{at, 5, 3}, {at.Add(-time.Nanosecond), 4, 2}} {
		out := filepath.Join(dir, "at.db")
		r = runCLI(t, append([]string{"restore", "--out", out, "--at", tc.at.Format(time.RFC3339Nano), "--json"}, f.actorFlags()...)...).want(t, exitOK)
		got := jsonOf[restoreReport](t, r).Restored[0]
		assert.Equal(t, tc.seq, got.Seq, "--at %s reached seq", tc.at.Format(time.RFC3339Nano))
		if n := rows(t, out); n != tc.rows {
			t.Errorf("--at %s: %d rows, want %d", tc.at.Format(time.RFC3339Nano), n, tc.rows)
		}
	}
}

// A target outside what the session holds fails with exit 4 naming the
// range, leaving nothing behind; --nearest restores the nearest state and
// says so. A time after the newest commit is the newest state.
func TestRestoreOutOfRange(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 8)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.db")
	restoreTo := func(code int, args ...string) result {
		t.Helper()
		return runCLI(t, append(append([]string{"restore", "--out", out}, args...), f.actorFlags()...)...).want(t, code)
	}

	r := restoreTo(exitNotFound, "--to-seq", "99")
	contains(t, "stderr", r.stderr, "seq 99 is past the newest state: session 1 holds seq 0..8", "--nearest")
	es, _ := os.ReadDir(dir)
	require.Len(t, es, 0, "a failed restore left")
	rep := jsonOf[restoreReport](t, restoreTo(exitOK, "--to-seq", "99", "--nearest", "--json"))
	got := rep.Restored[0]
	if got.Seq != 8 || got.OutOfRange == nil || got.OutOfRange.Requested != "seq 99 or the nearest" ||
		got.OutOfRange.FirstSeq != 0 || got.OutOfRange.LastSeq != 8 || rep.Target != "seq 99 or the nearest" {
		t.Fatalf("--to-seq 99 --nearest: %+v (out of range %+v)", got, got.OutOfRange)
	}
	wantSameFile(t, f.source, out)
	r = restoreTo(exitOK, "--to-seq", "99", "--nearest")
	contains(t, "restore --nearest", r.stdout, "OUT OF RANGE: seq 99 is past the newest state", "restored the nearest state, seq 8")

	// Before the first commit: the first snapshot (seq 0, the empty
	// database) does not say when it was made.
	r = runCLI(t, "inspect", "--bucket", f.url, f.actor.LogKey(1, 1), "--json").want(t, exitOK)
	var ins inspectReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ins))
	first := *ins.Batch.Frames[0].CommitTime
	before := first.Add(-time.Nanosecond).Format(time.RFC3339Nano)
	r = restoreTo(exitNotFound, "--at", before)
	contains(t, "stderr", r.stderr, "is before the oldest state the session can place in time, seq 1 committed at "+first.Format(time.RFC3339Nano))
	got = jsonOf[restoreReport](t, restoreTo(exitOK, "--at", before, "--nearest", "--json")).Restored[0]
	if got.Seq != 0 || got.OutOfRange == nil || got.OutOfRange.EarliestSeq != 1 || !got.OutOfRange.EarliestTime.Equal(first) {
		t.Fatalf("--at %s --nearest: %+v (out of range %+v)", before, got, got.OutOfRange)
	}

	// After the newest commit: the newest state, in range.
	got = jsonOf[restoreReport](t, restoreTo(exitOK, "--at", time.Now().Add(time.Hour).Format(time.RFC3339), "--json")).Restored[0]
	if got.Seq != 8 || got.OutOfRange != nil {
		t.Fatalf("--at an hour from now: %+v", got)
	}
	wantSameFile(t, f.source, out)
}

func TestRestoreAll(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 5)
	dir := filepath.Join(t.TempDir(), "restored")
	r := runCLI(t, "restore", "--bucket", f.url, "--namespace", testNamespace, "--all", "--out", dir).want(t, exitOK)
	contains(t, "restore --all", r.stdout, "restored 1 actors")
	wantSameFile(t, f.source, filepath.Join(dir, f.actor.Actor+".db"))
}

func TestRestoreDamaged(t *testing.T) {
	t.Run("flipped", func(t *testing.T) {
		f := replicate(t, buckettest.Dir(t), 6)
		key := f.batches(t)[2]
		damage(t, f.b, key, -6)
		out := filepath.Join(t.TempDir(), "out.db")
		r := runCLI(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitDamage)
		contains(t, "stderr", r.stderr, key)
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("a failed restore left %s behind: %v", out, err)
		}
	})
	t.Run("gap", func(t *testing.T) {
		f := replicate(t, buckettest.Dir(t), 6)
		batches := f.batches(t)
		if err := f.b.Delete(t.Context(), batches[2]); err != nil { // frame 3
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "out.db")
		r := runCLI(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitDamage)
		contains(t, "stderr", r.stderr, "sequence number 3 is missing", batches[3])
	})
}

func TestRestoreNotFound(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 2)
	out := filepath.Join(t.TempDir(), "out.db")
	r := runCLI(t, "restore", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef", "--out", out).want(t, exitNotFound)
	contains(t, "stderr", r.stderr, "0badbeef")
	runCLI(t, "restore", "--bucket", f.url, "--namespace", "nothing-here", "--all", "--out", t.TempDir()).want(t, exitNotFound)
}

func TestRestoreUsage(t *testing.T) {
	url := buckettest.Dir(t).String()
	dir := t.TempDir()
	file := filepath.Join(dir, "file.db")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	base := []string{"restore", "--bucket", url, "--namespace", "n"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "--bucket", url, "--actor", "00", "--out", file}, "--namespace (or --namespace-id) is required"},
		{append(base, "--out", file), "--actor HEX"},
		{append(base, "--actor", "00", "--all", "--out", dir), "exclude each other"},
		{append(base, "--actor", "00"), "--out is required"},
		{append(base, "--actor", "00", "--out", file, "--to-seq", "3", "--at", "2025-01-01T00:00:00Z"), "exclude each other"},
		{append(base, "--actor", "00", "--out", file, "--to-seq", "-3"), "not a sequence number"},
		{append(base, "--actor", "00", "--out", file, "--to-seq", "03"), "not a sequence number"},
		{append(base, "--actor", "00", "--out", file, "--at", "yesterday"), "RFC 3339"},
		{append(base, "--actor", "00", "--out", dir), "is a directory"},
		{append(base, "--all", "--out", file), "is a file"},
		{append(base, "--actor", "00", "--out", file, "--parallel", "x"), "invalid value"},
		{append(base, "--actor", "00", "--out", file, "--nearest"), "--nearest applies to a target"},
	} {
		r := runCLI(t, tc.args...).want(t, exitUsage)
		contains(t, "stderr", r.stderr, tc.want, "try: framectl restore --bucket")
	}
	r := runCLI(t, "restore", "--help").want(t, exitOK)
	contains(t, "restore --help", r.stdout, "Examples:", "-to-seq", "-at", "-nearest")
}

func TestRestoreUnreachable(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out.db")
	r := runCLI(t, "restore", "--bucket", unreachable, "--namespace", "n", "--actor", "00", "--out", out).want(t, exitIO)
	contains(t, "stderr", r.stderr, "framectl restore: ")
}

// The JSON documents name each number once: "epoch" for the session's
// epoch, "seq" (or firstSeq, lastSeq) for a sequence number, as JSON
// numbers; a checksum is 16 lowercase hex digits. Decoded into plain maps,
// not into the structs that write them, so a renamed tag or a number
// turned into a string fails here.
func TestJSONNames(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 6)
	decode := func(args ...string) map[string]any {
		t.Helper()
		r := runCLI(t, append(append(args, "--json"), f.actorFlags()...)...).want(t, exitOK)
		var doc map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, r.stdout)
		}
		return doc
	}
	want := func(what string, obj any, fields map[string]any) {
		t.Helper()
		m, ok := obj.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", what, obj)
		}
		for k, v := range fields {
			if m[k] != v {
				t.Errorf("%s: %q is %#v, want %#v (the object: %v)", what, k, m[k], v, m)
			}
		}
		for _, old := range []string{"session", "frame", "firstFrame", "lastFrame"} {
			if _, ok := m[old]; ok {
				t.Errorf("%s: still has %q: %v", what, old, m)
			}
		}
	}
	first := func(doc map[string]any, key string) any {
		t.Helper()
		list, ok := doc[key].([]any)
		if !ok || len(list) == 0 {
			t.Fatalf("%q is not a list with an element: %v", key, doc)
		}
		return list[0]
	}

	out := filepath.Join(t.TempDir(), "r.db")
	res := first(decode("restore", "--out", out, "--to-seq", "4"), "restored")
	want("restore", res, map[string]any{"epoch": 1.0, "seq": 4.0})
	sum, _ := res.(map[string]any)["checksum"].(string)
	assert.Regexp(t, "^[0-9a-f]{16}$", sum, "restore: checksum %#v is 16 lowercase hex digits", res.(map[string]any)["checksum"])
	ls := first(decode("ls"), "actors").(map[string]any)
	sessions, _ := ls["sessions"].([]any)
	require.Len(t, sessions, 1, "ls: sessions %v", ls["sessions"])
	want("ls session", sessions[0], map[string]any{"epoch": 1.0, "firstSeq": 0.0, "lastSeq": 6.0})
	objects, _ := sessions[0].(map[string]any)["objects"].([]any)
	if len(objects) == 0 {
		t.Fatalf("ls: no objects in %v", sessions[0])
	}
	want("ls object", objects[len(objects)-1], map[string]any{"epoch": 1.0, "seq": 6.0, "kind": "batch"})
	want("verify", first(decode("verify"), "actors"), map[string]any{"epoch": 1.0, "seq": 6.0})
}
