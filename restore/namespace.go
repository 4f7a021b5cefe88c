package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/workers"
)

// RestoreNamespace restores every actor of a namespace (its NamespaceID
// path element) into destDir, one file per actor named <actor hex>.db,
// opts.Actors at a time. It returns the results of the actors that were
// restored, in the order Actors lists them, and the failures of the
// others joined (each an *Error naming its actor). A namespace without
// actors is an error matching ErrNoSnapshot.
func RestoreNamespace(ctx context.Context, b bucket.Bucket, namespace, destDir string, opts Options) ([]Result, error) {
	opts = opts.withDefaults()
	actors, err := Actors(ctx, b, namespace)
	if err != nil {
		return nil, err
	}
	if len(actors) == 0 {
		return nil, &Error{Op: "restore", Actor: "do/" + namespace + "/", Err: fmt.Errorf("%w: the namespace has no actors", ErrNoSnapshot)}
	}
	if err := os.MkdirAll(destDir, 0o755); err != nil {
		return nil, &Error{Op: "restore", Actor: "do/" + namespace + "/", Err: err}
	}
	results := make([]Result, len(actors))
	errs := make([]error, len(actors))
	forEachActor(actors, opts.Actors, func(i int, a frames.Actor) {
		results[i], errs[i] = Restore(ctx, b, a, filepath.Join(destDir, a.Actor+".db"), opts)
	})
	var ok []Result
	for i := range actors {
		if errs[i] == nil {
			ok = append(ok, results[i])
		}
	}
	return ok, errors.Join(errs...)
}

// forEachActor calls fn for every actor, n at a time. Once ctx ends, fn
// fails fast: every actor still gets its result. So the pool itself runs
// under no context that ends, and fn never fails it.
func forEachActor(actors []frames.Actor, n int, fn func(i int, a frames.Actor)) {
	idx := make([]int, len(actors))
	for i := range idx {
		idx[i] = i
	}
	_ = workers.Run(context.Background(), idx, min(n, len(actors)), func(_ context.Context, _ *struct{}, i int) error {
		fn(i, actors[i])
		return nil
	})
}

// VerifyNamespace verifies every actor of a namespace (its NamespaceID
// path element), opts.Actors at a time, and returns their reports in the
// order Actors lists them.
func VerifyNamespace(ctx context.Context, b bucket.Bucket, namespace string, opts VerifyOptions) ([]Report, error) {
	return VerifyPrefix(ctx, b, "do/"+namespace+"/", opts)
}

// VerifyPrefix verifies every actor with a key under prefix ("" for the
// whole bucket, "do/", "do/<namespace>/", ...), opts.Actors at a time.
// Keys under the prefix that belong to no actor and are neither node
// leases nor alarm index entries are reported as stray warnings in a last Report whose Actor is zero.
// The error is for what stops verification (see Verify); reports of the
// actors verified are returned with it.
func VerifyPrefix(ctx context.Context, b bucket.Bucket, prefix string, opts VerifyOptions) ([]Report, error) {
	var (
		actors []frames.Actor
		stray  Report
	)
	seen := map[frames.Actor]bool{}
	for info, err := range bucket.All(ctx, b, prefix) {
		if err != nil {
			return nil, &Error{Op: "verify", Actor: prefix, Err: err}
		}
		k, err := frames.ParseKey(info.Key)
		switch {
		case err == nil && (k.Kind == frames.KeyNode || k.Kind == frames.KeyAlarm):
			// Not an actor's object: a lease, or an alarm index entry
			// (package host's hint; the alarm is in the actor's database).
		case err == nil:
			if a := k.ActorOf(); !seen[a] {
				seen[a] = true
				actors = append(actors, a)
			}
		default:
			// A key under an actor's prefix that does not parse is that
			// actor's stray (Verify lists it); anything else is the
			// bucket's.
			if a, ok := actorOfPrefix(info.Key); ok {
				if !seen[a] {
					seen[a] = true
					actors = append(actors, a)
				}
				continue
			}
			stray.Problems = append(stray.Problems, Problem{Key: info.Key, Kind: KindStray, Severity: Warning,
				Message: "not an object framectl writes"})
		}
	}
	if opts.Actors <= 0 {
		opts.Actors = DefaultActors
	}
	reports := make([]Report, len(actors))
	errs := make([]error, len(actors))
	forEachActor(actors, opts.Actors, func(i int, a frames.Actor) {
		reports[i], errs[i] = Verify(ctx, b, a, opts)
	})
	var out []Report
	for i := range actors {
		if errs[i] == nil {
			out = append(out, reports[i])
		}
	}
	if len(stray.Problems) > 0 {
		out = append(out, stray)
	}
	return out, errors.Join(errs...)
}

// actorOfPrefix returns the actor whose prefix key lies under, when the
// namespace and actor elements are valid.
func actorOfPrefix(key string) (frames.Actor, bool) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) < 4 || parts[0] != "do" {
		return frames.Actor{}, false
	}
	a := frames.Actor{Namespace: parts[1], Actor: parts[2]}
	return a, a.Valid()
}
