package compact

import (
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/restore"
)

// Namespace runs Actor over every actor of a namespace (its
// frames.NamespaceID path element), one after the other. A failure on one
// actor does not stop the others: the results of every actor tried are
// returned, with the failures joined (errors.Join), each a *Error naming its
// actor. Cancelling ctx stops at the next actor, with ctx's error among the
// failures.
func Namespace(ctx context.Context, b bucket.Bucket, namespace string, opts Options) ([]Result, error) {
	if !(frames.Actor{Namespace: namespace, Actor: "00"}).Valid() {
		return nil, &Error{Op: "list", Key: "do/" + namespace + "/", Err: fmt.Errorf("%q is not a namespace ID (22 characters of base64url)", namespace)}
	}
	actors, err := restore.Actors(ctx, b, namespace)
	if err != nil {
		return nil, &Error{Op: "list", Key: "do/" + namespace + "/", Err: err}
	}
	var results []Result
	var errs []error
	for _, a := range actors {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		res, err := Actor(ctx, b, a, opts)
		results = append(results, res)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return results, errors.Join(errs...)
}
