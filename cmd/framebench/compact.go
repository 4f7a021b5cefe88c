package main

import (
	"context"
	"fmt"
	"time"

	"github.com/framectl/framectl/compact"
)

// Compaction of the restore fixture: one pass at the moment the size rule
// would fire (a snapshot and a log each about the database's size), forced
// because the rule compares the log's stored bytes with the database's raw
// size. It reads the snapshot and every batch, rebuilds the database,
// writes a new snapshot, and deletes what it covers.
func init() {
	fixtureMeasures = append(fixtureMeasures, func(ctx context.Context, fx *restoreFixture) error {
		res, err := compact.Actor(ctx, fx.b, fx.actor, compact.Options{Force: true, ScratchDir: fx.dir, Live: true}) // the fixture's writer never compacts
		if err != nil {
			return err
		}
		fmt.Printf("\ncompaction of the same session (one forced pass; MiB/s of database over its time)\n")
		fmt.Printf("| database | time | MiB/s of database | read | written | deleted |\n|---|---|---|---|---|---|\n")
		fmt.Printf("| %s | %v | %.1f | %s (snapshot + %d batches) | %s (new snapshot through seq %d) | %d objects |\n",
			mib(fx.dbBytes), res.Duration.Round(time.Millisecond), float64(fx.dbBytes)/(1<<20)/res.Duration.Seconds(),
			mib(res.BytesRead), len(fx.batches), mib(res.BytesWritten), res.Seq, len(res.Deleted))
		return nil
	})
}
