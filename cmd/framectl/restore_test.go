package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/framectl/framectl/bucket/buckettest"
)

// rows counts the rows of table t in a database file, read-only.
func rows(t *testing.T, path string) int {
	t.Helper()
	u := url.URL{Scheme: "file", Path: path, RawQuery: "vfs=os&mode=ro&immutable=1"}
	c, err := sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, _, err := c.Prepare("SELECT count(*) FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Step() {
		t.Fatal(s.Err())
	}
	return s.ColumnInt(0)
}

func restoreJSON(t *testing.T, r result) restoreReport {
	t.Helper()
	var rep restoreReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return rep
}

func TestRestore(t *testing.T) {
	for _, be := range buckettest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			f := replicate(t, be.New(t), 8)
			out := filepath.Join(t.TempDir(), "restored.db")
			r := framectl(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "restore", r.stdout, out, "session 1, frame 8")
			contains(t, "progress", r.stderr, "restore "+f.actor.Actor+": 100%")
			sameBytes(t, f.source, out)

			// Again over the file it wrote, as JSON: nothing on stderr.
			r = framectl(t, append([]string{"restore", "--out", out, "--json"}, f.actorFlags()...)...).want(t, exitOK)
			rep := restoreJSON(t, r)
			if len(rep.Restored) != 1 || rep.Restored[0].Frame != 8 || rep.Restored[0].Path != out || rep.Target != "latest" {
				t.Errorf("restore --json: %+v", rep)
			}
			if r.stderr != "" {
				t.Errorf("restore --json wrote progress: %s", r.stderr)
			}
			sameBytes(t, f.source, out)
			// -v: progress on stderr even with --json.
			r = framectl(t, append([]string{"restore", "--out", out, "--json", "-v"}, f.actorFlags()...)...).want(t, exitOK)
			contains(t, "restore --json -v", r.stderr, "100%")
			restoreJSON(t, r)
		})
	}
}

// Point in time: every commit of the fixture is a batch of its own, so each
// frame is a boundary restore can stop at.
func TestRestoreToFrame(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 8)
	dir := t.TempDir()
	// Frames: 1 CREATE, 2 INSERT, 3 INSERT, 4 UPDATE, 5 INSERT, ...
	out := filepath.Join(dir, "frame4.db")
	r := framectl(t, append([]string{"restore", "--out", out, "--to-frame", "4", "--json"}, f.actorFlags()...)...).want(t, exitOK)
	rep := restoreJSON(t, r)
	if got := rep.Restored[0]; got.Frame != 4 || got.CommitTime == nil || rep.Target != "frame 4" {
		t.Fatalf("--to-frame 4 reached %+v", got)
	}
	if n := rows(t, out); n != 2 {
		t.Errorf("at frame 4 the table has %d rows, want 2", n)
	}

	// --at the commit time of frame 5 reaches frame 5 (3 rows); a
	// nanosecond earlier, frame 4.
	r = framectl(t, "inspect", "--bucket", f.url, f.actor.LogKey(1, 5), "--json").want(t, exitOK)
	var ins inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &ins); err != nil {
		t.Fatal(err)
	}
	at := *ins.Batch.Frames[0].CommitTime
	for _, tc := range []struct {
		at    time.Time
		frame uint64
		rows  int
	}{{at, 5, 3}, {at.Add(-time.Nanosecond), 4, 2}} {
		out := filepath.Join(dir, "at.db")
		r = framectl(t, append([]string{"restore", "--out", out, "--at", tc.at.Format(time.RFC3339Nano), "--json"}, f.actorFlags()...)...).want(t, exitOK)
		if got := restoreJSON(t, r).Restored[0]; got.Frame != tc.frame {
			t.Errorf("--at %s reached frame %d, want %d", tc.at.Format(time.RFC3339Nano), got.Frame, tc.frame)
		}
		if n := rows(t, out); n != tc.rows {
			t.Errorf("--at %s: %d rows, want %d", tc.at.Format(time.RFC3339Nano), n, tc.rows)
		}
	}
}

func TestRestoreAll(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 5)
	dir := filepath.Join(t.TempDir(), "restored")
	r := framectl(t, "restore", "--bucket", f.url, "--namespace", testNamespace, "--all", "--out", dir).want(t, exitOK)
	contains(t, "restore --all", r.stdout, "restored 1 actors")
	sameBytes(t, f.source, filepath.Join(dir, f.actor.Actor+".db"))
}

func TestRestoreDamaged(t *testing.T) {
	t.Run("flipped", func(t *testing.T) {
		f := replicate(t, buckettest.Dir(t), 6)
		key := f.batches(t)[2]
		damage(t, f.b, key, -6)
		out := filepath.Join(t.TempDir(), "out.db")
		r := framectl(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitDamage)
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
		r := framectl(t, append([]string{"restore", "--out", out}, f.actorFlags()...)...).want(t, exitDamage)
		contains(t, "stderr", r.stderr, "frame 3 is missing", batches[3])
	})
}

func TestRestoreNotFound(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 2)
	out := filepath.Join(t.TempDir(), "out.db")
	r := framectl(t, "restore", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef", "--out", out).want(t, exitNotFound)
	contains(t, "stderr", r.stderr, "0badbeef")
	framectl(t, "restore", "--bucket", f.url, "--namespace", "nothing-here", "--all", "--out", t.TempDir()).want(t, exitNotFound)
}

func TestRestoreUsage(t *testing.T) {
	url := buckettest.Dir(t).String()
	dir := t.TempDir()
	file := filepath.Join(dir, "file.db")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"restore", "--bucket", url, "--namespace", "n"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "--bucket", url, "--actor", "00", "--out", file}, "--namespace (or --namespace-id) is required"},
		{append(base, "--out", file), "--actor HEX"},
		{append(base, "--actor", "00", "--all", "--out", dir), "exclude each other"},
		{append(base, "--actor", "00"), "--out is required"},
		{append(base, "--actor", "00", "--out", file, "--to-frame", "3", "--at", "2025-01-01T00:00:00Z"), "exclude each other"},
		{append(base, "--actor", "00", "--out", file, "--to-frame", "-3"), "not a frame number"},
		{append(base, "--actor", "00", "--out", file, "--at", "yesterday"), "RFC 3339"},
		{append(base, "--actor", "00", "--out", dir), "is a directory"},
		{append(base, "--all", "--out", file), "is a file"},
		{append(base, "--actor", "00", "--out", file, "--parallel", "x"), "invalid value"},
	} {
		r := framectl(t, tc.args...).want(t, exitUsage)
		contains(t, "stderr", r.stderr, tc.want, "try: framectl restore --bucket")
	}
	r := framectl(t, "restore", "--help").want(t, exitOK)
	contains(t, "restore --help", r.stdout, "Examples:", "-to-frame", "-at")
}

func TestRestoreUnreachable(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out.db")
	r := framectl(t, "restore", "--bucket", unreachable, "--namespace", "n", "--actor", "00", "--out", out).want(t, exitIO)
	contains(t, "stderr", r.stderr, "framectl restore: ")
}
