package main

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/framectl/framectl/chunks"
	"github.com/framectl/framectl/compact"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/lanes"
	"github.com/framectl/framectl/peer"
	"github.com/framectl/framectl/quorum"
	"github.com/framectl/framectl/restore"
	"github.com/framectl/framectl/session"
	"github.com/framectl/framectl/tails"
)

// damagePackages are the packages whose sentinels and error types
// TestDamageIsOneSentinel classifies, every one of them: those of the
// bucket's objects and the ones that read them (cmd/framectl, compaction
// and verify decide on their errors), and those of the follower protocol,
// whose decoders share frames' sentinels.
var damagePackages = []string{"bucket", "frames", "lanes", "chunks", "fence", "restore", "compact", "tails", "follow", "peer", "quorum", "session", "capture"}

// damageErrors and soundErrors name every exported sentinel (Err*) and
// error type (*Error) of damagePackages by "package.Name", beside errors
// the code makes, named in words. The first are damage: they match
// frames.ErrDamage and exit 1. The others do not.
func damageErrors(t *testing.T) map[string]error {
	a := testActor
	batch := a.LogKey(1, 9)
	_, badBatch := frames.NewBatchReader(bytes.NewReader([]byte("not a batch")), batch, frames.Limits{})
	_, badRecord := fence.ParseRecord(a.OwnKey(), []byte(`{"epoch":0}`))
	_, badLease := fence.ParseLease(frames.NodeKey("n1"), []byte(`{}`))
	b := buckettest.Dir(t)
	put(t, b, a.OwnKey(), strings.Repeat(" ", fence.MaxRecordBytes+1))
	_, _, bigRecord := fence.ReadRecord(t.Context(), b, a)
	nodes := buckettest.Dir(t)
	put(t, nodes, frames.NodesPrefix+"stray", "x") // under nodes/, not a lease's key
	_, notLease := fence.SweepLeases(t.Context(), nodes, time.Hour, time.Now())
	return map[string]error{
		"frames.ErrDamage":         frames.ErrDamage,
		"frames.ErrCorrupt":        frames.ErrCorrupt,
		"frames.ErrTruncated":      frames.ErrTruncated,
		"frames.ErrTooLarge":       frames.ErrTooLarge,
		"frames.ErrUnknownKind":    frames.ErrUnknownKind,
		"frames.Error":             &frames.Error{Object: "batch", Key: batch, Err: frames.ErrCorrupt},
		"frames.KeyMismatchError":  &frames.KeyMismatchError{},
		"a batch that is not one":  badBatch,
		"lanes.ErrGap":             lanes.ErrGap,
		"lanes.ErrChecksum":        lanes.ErrChecksum,
		"lanes.ErrCorrupt":         lanes.ErrCorrupt,
		"lanes.GapError":           &lanes.GapError{From: 4, To: 6},
		"lanes.Error":              &lanes.Error{Op: "replay", Key: batch, Err: &lanes.GapError{From: 4, To: 6}},
		"chunks.ErrMissing":        chunks.ErrMissing,
		"chunks.Error":             &chunks.Error{Op: "load", Manifest: a.SnapshotKey(1, 3), Err: chunks.ErrMissing},
		"fence.ErrBadRecord":       fence.ErrBadRecord,
		"fence.ErrBadLease":        fence.ErrBadLease,
		"fence.ErrBadIdentity":     fence.ErrBadIdentity,
		"own.json that is not one": badRecord,
		"own.json too large":       bigRecord,
		"a lease that is not one":  badLease,
		"a key under nodes/":       notLease,
		"restore.ErrIntegrity":     restore.ErrIntegrity,
		"restore.ErrOwnMismatch":   restore.ErrOwnMismatch,
		"restore.ErrTailMissing":   restore.ErrTailMissing,
		"restore.ErrDamage":        restore.ErrDamage,
		"restore.TailError":        &restore.TailError{Key: a.OwnKey(), Epoch: 1, ReachedSeq: 3, EndSeq: 9},
		"restore.Error":            &restore.Error{Op: "replay", Actor: a.Prefix(), Key: batch, Err: badBatch},
		"compact.Error":            &compact.Error{Op: "replay", Actor: a, Key: batch, Err: lanes.ErrChecksum},
		"tails.FileError":          &tails.FileError{Path: "tails/x", Offset: 9, Err: frames.ErrTruncated},
		"follow.MessageError":      &follow.MessageError{From: "n1", Err: frames.ErrUnknownKind},
		"peer.ConnError":           &peer.ConnError{Op: "receive", Err: frames.ErrCorrupt},
		"a batch larger than listed": frames.Damaged(&bucket.Error{Op: "get", Key: batch,
			Err: bucket.ErrTooLarge}),
	}
}

func soundErrors(t *testing.T) map[string]error {
	a := testActor
	batch := a.LogKey(1, 9)
	// A conditional put too large for S3: refused before any request (and
	// before the body, which is not seekable, is read).
	s3, err := bucket.Open(t.Context(), "s3://bkt/?endpoint=127.0.0.1:1&insecure=1")
	if err != nil {
		t.Fatal(err)
	}
	_, bigPut := s3.Put(t.Context(), batch, struct{ io.Reader }{bytes.NewReader(nil)}, bucket.MaxConditionalPutSize+1, bucket.Condition{IfAbsent: true})
	return map[string]error{
		"bucket.ErrNotFound":               bucket.ErrNotFound,
		"bucket.ErrPrecondition":           bucket.ErrPrecondition,
		"bucket.ErrKeyConflict":            bucket.ErrKeyConflict,
		"bucket.ErrInvalidKey":             bucket.ErrInvalidKey,
		"bucket.ErrNoBucket":               bucket.ErrNoBucket,
		"bucket.ErrTooLarge":               bucket.ErrTooLarge,
		"bucket.ErrBadURL":                 bucket.ErrBadURL,
		"bucket.Error":                     &bucket.Error{Op: "get", Key: batch, Err: bucket.ErrNotFound},
		"a conditional put too large":      bigPut,
		"an injected fault":                buckettest.ErrInjected,
		"an outage":                        buckettest.ErrOutage,
		"context.Canceled":                 context.Canceled,
		"context.DeadlineExceeded":         context.DeadlineExceeded,
		"a body cut short":                 &bucket.Error{Op: "get", Key: batch, Err: io.ErrUnexpectedEOF},
		"a disk error":                     &fs.PathError{Op: "read", Path: "/x", Err: syscall.EIO},
		"permissions":                      os.ErrPermission,
		"frames.ErrInvalid":                frames.ErrInvalid,
		"frames.Error of a key":            &frames.Error{Object: "key", Key: "do/x", Err: frames.ErrInvalid},
		"lanes.ErrBroken":                  lanes.ErrBroken,
		"lanes.ErrNotLazy":                 lanes.ErrNotLazy,
		"lanes.ErrNotLoaded":               lanes.ErrNotLoaded,
		"lanes.Error of a sync":            &lanes.Error{Op: "sync", Err: syscall.ENOSPC},
		"chunks.Error of a put":            &chunks.Error{Op: "write", Manifest: a.SnapshotKey(1, 3), Err: buckettest.ErrInjected},
		"fence.ErrHeld":                    fence.ErrHeld,
		"fence.HeldError":                  &fence.HeldError{Actor: a, Epoch: 2, Node: "n1"},
		"fence.ErrHolderUnseen":            fence.ErrHolderUnseen,
		"fence.ErrNotClaiming":             fence.ErrNotClaiming,
		"fence.ErrIdentityCopied":          fence.ErrIdentityCopied,
		"fence.ErrFenced":                  fence.ErrFenced,
		"fence.ErrLeaseLost":               fence.ErrLeaseLost,
		"fence.ErrClosed":                  fence.ErrClosed,
		"restore.ErrNoSnapshot":            restore.ErrNoSnapshot,
		"restore.ErrReplans":               restore.ErrReplans,
		"restore.ErrDestination":           restore.ErrDestination,
		"restore.ErrTargetOutOfRange":      restore.ErrTargetOutOfRange,
		"restore.TargetError":              &restore.TargetError{Target: restore.ToSeq(99), Epoch: 1, FirstSeq: 1, LastSeq: 9},
		"restore.Error of a 404":           &restore.Error{Op: "replay", Key: batch, Err: &bucket.Error{Op: "get", Key: batch, Err: bucket.ErrNotFound}},
		"compact.ErrRaced":                 compact.ErrRaced,
		"compact.Error of a delete":        &compact.Error{Op: "delete", Actor: a, Err: buckettest.ErrInjected},
		"tails.ErrLocked":                  tails.ErrLocked,
		"tails.ErrFull":                    tails.ErrFull,
		"tails.ErrInvalid":                 tails.ErrInvalid,
		"tails.ErrFailed":                  tails.ErrFailed,
		"tails.ErrClosed":                  tails.ErrClosed,
		"follow.ErrSuperseded":             follow.ErrSuperseded,
		"follow.ErrTooFewAnswers":          follow.ErrTooFewAnswers,
		"follow.ErrDiverged":               follow.ErrDiverged,
		"follow.ErrBackpressure":           follow.ErrBackpressure,
		"follow.ErrInvalid":                follow.ErrInvalid,
		"follow.ErrFollowerFull":           follow.ErrFollowerFull,
		"follow.ErrFollowerBroken":         follow.ErrFollowerBroken,
		"follow.SupersededError":           &follow.SupersededError{Epoch: 1, Newer: 2},
		"follow.TooFewAnswersError":        &follow.TooFewAnswersError{Epoch: 1, Need: 2},
		"follow.DivergedError":             &follow.DivergedError{Epoch: 1, Follower: "f1"},
		"peer.ErrWeakKey":                  peer.ErrWeakKey,
		"peer.ErrAuth":                     peer.ErrAuth,
		"peer.ErrWrongPeer":                peer.ErrWrongPeer,
		"peer.ErrBackpressure":             peer.ErrBackpressure,
		"peer.ErrNoRoute":                  peer.ErrNoRoute,
		"peer.ErrClosed":                   peer.ErrClosed,
		"peer.ErrInvalid":                  peer.ErrInvalid,
		"peer.ConnError of a timeout":      &peer.ConnError{Op: "receive", Err: os.ErrDeadlineExceeded},
		"quorum.ErrClosed":                 quorum.ErrClosed,
		"quorum.ErrNotSuspected":           quorum.ErrNotSuspected,
		"session.ErrFenced":                session.ErrFenced,
		"session.ErrClosed":                session.ErrClosed,
		"session.ErrBackpressure":          session.ErrBackpressure,
		"session.ErrStopped":               session.ErrStopped,
		"session.ErrSyncTimeout":           session.ErrSyncTimeout,
		"session.ErrListingBehind":         session.ErrListingBehind,
		"the CLI's own not found":          errNotFound,
		"a restore --all that was stopped": errors.Join(context.Canceled, buckettest.ErrInjected),
	}
}

// One answer to "is this damage?": every error that means a stored object
// is corrupt, missing or inconsistent matches frames.ErrDamage and exits 1;
// no other does, nor exits 1. Every sentinel and error type of
// damagePackages is in one list or the other.
func TestDamageIsOneSentinel(t *testing.T) {
	damage, sound := damageErrors(t), soundErrors(t)
	for name, err := range damage {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !errors.Is(err, frames.ErrDamage) {
			t.Errorf("%s: %v does not match frames.ErrDamage", name, err)
		}
		if code := exitCode(err); code != exitDamage {
			t.Errorf("%s: %v exits %d, want %d", name, err, code, exitDamage)
		}
		if errors.Is(err, bucket.ErrNotFound) || errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v is damage and matches bucket.ErrNotFound or context.Canceled", name, err)
		}
	}
	for name, err := range sound {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if errors.Is(err, frames.ErrDamage) {
			t.Errorf("%s: %v matches frames.ErrDamage", name, err)
		}
		if code := exitCode(err); code == exitDamage {
			t.Errorf("%s: %v exits %d (damage)", name, err, code)
		}
	}
	// The conditional put too large: bucket.ErrTooLarge, once listed as
	// damage whatever its origin, is an I/O failure of a write.
	if err := sound["a conditional put too large"]; !errors.Is(err, bucket.ErrTooLarge) || exitCode(err) != exitIO {
		t.Errorf("a conditional put too large: %v exits %d, want %d matching bucket.ErrTooLarge", err, exitCode(err), exitIO)
	}
	declared := declaredErrors(t)
	if !slices.Contains(declared, "frames.ErrDamage") || !slices.Contains(declared, "restore.Error") {
		t.Fatalf("the source scan missed frames.ErrDamage or restore.Error: %v", declared)
	}
	for _, name := range declared {
		_, isDamage := damage[name]
		_, isSound := sound[name]
		if !isDamage && !isSound {
			t.Errorf("%s is neither damage nor sound here: say which", name)
		}
	}
}

// declaredErrors lists the exported sentinels (var Err*) and error types
// (type *Error) of damagePackages, as "package.Name", from their source.
func declaredErrors(t *testing.T) []string {
	var names []string
	for _, pkg := range damagePackages {
		dir := filepath.Join("..", "..", pkg)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		fset := token.NewFileSet()
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range g.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if g.Tok == token.VAR && n.IsExported() && strings.HasPrefix(n.Name, "Err") {
								names = append(names, pkg+"."+n.Name)
							}
						}
					case *ast.TypeSpec:
						if s.Name.IsExported() && strings.HasSuffix(s.Name.Name, "Error") {
							names = append(names, pkg+"."+s.Name.Name)
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}
