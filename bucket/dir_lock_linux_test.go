package bucket_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/stretchr/testify/require"
)

// The "stop" helper puts one key and stops itself (SIGSTOP) right after
// taking the key's lock, as a process frozen mid-Put would.
const (
	stopKeyEnv  = "FRAMECTL_BUCKET_STOP_KEY"
	stopETagEnv = "FRAMECTL_BUCKET_STOP_ETAG"
	stopBody    = "written by the stopped process"
)

func init() { helperModes["stop"] = stopHelper }

// stopHelper prints "locked" once it holds the key's lock, stops itself,
// and when continued finishes the put (a compare-and-swap on
// $FRAMECTL_BUCKET_STOP_ETAG) and prints "put ETAG".
func stopHelper() int {
	key := os.Getenv(stopKeyEnv)
	b, err := bucket.NewDir(os.Getenv(helperRootEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	bucket.SetTestHook(func(point, k string) {
		if point == "locked" && k == key {
			fmt.Println("locked")
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
	})
	info, err := b.Put(context.Background(), key, strings.NewReader(stopBody), int64(len(stopBody)), bucket.Condition{IfMatch: os.Getenv(stopETagEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Println("put", info.ETag)
	return 0
}

// processState is the state letter of a process in /proc (T: stopped).
func processState(t *testing.T, pid int) byte {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		t.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	return stat[i+2]
}

// TestDirStoppedWriter: a process stopped (SIGSTOP) inside a Put, holding
// its key's lock, delays only that key. Puts of other keys (conditional or
// not, in the same directory or not), deletes, and the compare-and-swap
// renewal of a lease complete while it is stopped; a Put or Delete of its
// key waits, and gives up with its context's error without changing the
// object; once continued, the stopped Put completes its compare-and-swap.
func TestDirStoppedWriter(t *testing.T) {
	const (
		key   = "do/ns/actor/own.json"
		lease = "nodes/node-1.json"
	)
	root := t.TempDir()
	d, err := bucket.NewDir(root)
	require.NoError(t, err)
	v0 := put(t, d, key, "version 0")
	leaseInfo := put(t, d, lease, "lease 0")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=stop", helperRootEnv+"="+root, stopKeyEnv+"="+key, stopETagEnv+"="+v0.ETag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := false
	t.Cleanup(func() {
		if !done { // SIGKILL ends a stopped process too
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "locked" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %s", lines.Text(), stderr.String())
	}
	for state := processState(t, cmd.Process.Pid); state != 'T'; state = processState(t, cmd.Process.Pid) {
		if state == 'Z' || state == 'X' {
			t.Fatalf("the helper exited instead of stopping: %s", stderr.String())
		}
		time.Sleep(time.Millisecond)
	}

	// Everything but the stopped process's key goes on. The deadline is
	// only there so that a bucket where everyone waits fails rather than
	// hangs.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	try := func(what string, err error) {
		t.Helper()
		require.NoError(t, err, "%s while another process is stopped holding %s's lock", what, key)
	}
	putCtx := func(ctx context.Context, k, body string, cond bucket.Condition) (bucket.Info, error) {
		return d.Put(ctx, k, strings.NewReader(body), int64(len(body)), cond)
	}
	for i := range 3 { // a node renewing its lease
		leaseInfo, err = putCtx(ctx, lease, fmt.Sprintf("lease %d", i+1), bucket.Condition{IfMatch: leaseInfo.ETag})
		try("lease renewal", err)
	}
	_, err = putCtx(ctx, "do/ns/other/own.json", "claim", bucket.Condition{IfAbsent: true})
	try("create-only put of another actor's record", err)
	_, err = putCtx(ctx, "do/ns/actor/log/1", "batch", bucket.Condition{})
	try("put of a key beside it", err)
	_, err = putCtx(ctx, "do/ns/actor/log/1", "batch", bucket.Condition{IfAbsent: true})
	require.ErrorIs(t, err, bucket.ErrPrecondition, "create-only put of an existing key beside it")
	try("delete of a key beside it", d.Delete(ctx, "do/ns/actor/log/1"))
	try("delete of a key in another directory", d.Delete(ctx, "do/ns/other/own.json"))

	// Its own key waits, whatever the condition, and gives up with the
	// context's error: no success, no change.
	for _, cond := range []bucket.Condition{{}, {IfMatch: v0.ETag}} {
		short, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := putCtx(short, key, "from the parent", cond)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("put %+v of the stopped process's key: %v, want the context's deadline", cond, err)
		}
	}
	short, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err = d.Delete(short, key)
	cancel2()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delete of the stopped process's key: %v, want the context's deadline", err)
	}
	if body, info := mustGet(t, d, key); body != "version 0" || info.ETag != v0.ETag {
		t.Fatalf("%s changed while its writer was stopped: %q %+v", key, body, info)
	}
	// Only the stopped process's body is waiting in tmp/: the parent's
	// abandoned puts left nothing.
	ents, err := os.ReadDir(filepath.Join(root, bucket.ReservedName, "tmp"))
	require.NoError(t, err, "temporary files while stopped")
	require.Len(t, ents, 1, "temporary files while stopped")

	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	var etag string
	if !lines.Scan() {
		t.Fatalf("helper said nothing after SIGCONT: %s", stderr.String())
	}
	_, err = fmt.Sscanf(lines.Text(), "put %s", &etag)
	require.NoError(t, err, "helper: %q", lines.Text())
	done = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	if body, info := mustGet(t, d, key); body != stopBody || info.ETag != etag {
		t.Fatalf("after SIGCONT %s holds %q %+v, want the helper's put (ETag %s)", key, body, info, etag)
	}
	require.Equal(t, []string{key, lease}, keysOf(listAll(t, d, "", "", 0)), "keys")
	ents, err = os.ReadDir(filepath.Join(root, bucket.ReservedName, "tmp"))
	require.NoError(t, err, "temporary files left")
	require.Len(t, ents, 0, "temporary files left")
	// The key is free again.
	_, err = putCtx(ctx, key, "after", bucket.Condition{IfMatch: etag})
	require.NoError(t, err)
}

// TestDirParkedWriterInProcess: a goroutine parked inside a Put, holding
// its key's lock, delays only that key for the other goroutines of the
// process, through the same Dir or another one on the same root.
func TestDirParkedWriterInProcess(t *testing.T) {
	root := t.TempDir()
	d, err := bucket.NewDir(root)
	require.NoError(t, err)
	other, err := bucket.NewDir(root)
	require.NoError(t, err)
	lease := put(t, d, "nodes/n.json", "0")
	parked, finish := parkPut(t, d, "do/ns/a/own.json", "locked")
	<-parked

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i, b := range []*bucket.Dir{d, other, d, other} {
		body := fmt.Sprint(i + 1)
		info, err := b.Put(ctx, "nodes/n.json", strings.NewReader(body), int64(len(body)), bucket.Condition{IfMatch: lease.ETag})
		require.NoError(t, err, "lease renewal %d while a goroutine holds another key", i+1)
		lease = info
		_, err = b.Put(ctx, "do/ns/a/log/"+body, strings.NewReader(body), int64(len(body)), bucket.Condition{IfAbsent: true})
		require.NoError(t, err, "put beside the held key")
		require.NoError(t, b.Delete(ctx, "do/ns/a/log/"+body), "delete beside the held key")
	}
	_, err = finish()
	require.NoError(t, err, "the parked put")
}
