package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/framectl/framectl/bucket"
)

// Open a bucket by URL, claim a key with a create-only put, then update it
// with compare-and-swap: the pattern behind own.json and node leases.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "framectl-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	b, err := bucket.Open(ctx, "file://"+dir) // or s3://bucket/prefix?endpoint=...
	if err != nil {
		panic(err)
	}
	put := func(body string, cond bucket.Condition) (bucket.Info, error) {
		return b.Put(ctx, "own.json", strings.NewReader(body), int64(len(body)), cond)
	}

	// Create-only: the first claim wins, the second learns it lost.
	first, err := put(`{"epoch":1,"node":"a"}`, bucket.Condition{IfAbsent: true})
	fmt.Println("node a claims:", err)
	_, err = put(`{"epoch":1,"node":"b"}`, bucket.Condition{IfAbsent: true})
	fmt.Println("node b claims:", errors.Is(err, bucket.ErrPrecondition))

	// Compare-and-swap: only a writer holding the current ETag succeeds.
	_, err = put(`{"epoch":2,"node":"a"}`, bucket.Condition{IfMatch: first.ETag})
	fmt.Println("node a renews with the current ETag:", err)
	_, err = put(`{"epoch":2,"node":"b"}`, bucket.Condition{IfMatch: first.ETag})
	fmt.Println("node b with a stale ETag:", errors.Is(err, bucket.ErrPrecondition))

	data, _, err := bucket.ReadAll(ctx, b, "own.json", 1<<10)
	fmt.Println(string(data), err)
	// Output:
	// node a claims: <nil>
	// node b claims: true
	// node a renews with the current ETag: <nil>
	// node b with a stale ETag: true
	// {"epoch":2,"node":"a"} <nil>
}
