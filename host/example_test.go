package host_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3" for database/sql

	"github.com/framectl/framectl/alarm"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/host"
)

// A runtime keeps a connection pool per open actor (Hooks), acquires the
// actor for each event, writes, and replies only once the write is
// durable.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "framectl-host-example-")
	defer os.RemoveAll(tmp)
	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}

	h, err := host.New(ctx, host.Config{
		Bucket:  b,
		Address: "127.0.0.1:8080", // where peers forward requests: this node's listener
		Dir:     filepath.Join(tmp, "data"),
		Hooks: host.Hooks{
			Opened: func(ctx context.Context, a *host.Actor) error {
				pool, err := sql.Open("sqlite3", a.DB().DSN())
				if err != nil {
					return err
				}
				if _, err := pool.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS notes(body TEXT)`); err != nil {
					pool.Close()
					return err
				}
				a.SetValue(pool)
				return nil
			},
			Closing: func(_ context.Context, a *host.Actor) { a.Value().(*sql.DB).Close() },
		},
	})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)

	// One event for actor room-42 of namespace chat. A *fence.HeldError
	// would name the live node holding it: forward there (Host.Handler
	// does that for HTTP).
	a, err := h.Acquire(ctx, "chat", []byte("room-42"))
	if err != nil {
		panic(err)
	}
	pool := a.Value().(*sql.DB)
	if _, err := pool.ExecContext(ctx, `INSERT INTO notes VALUES ('hello')`); err != nil {
		panic(err)
	}
	// The output gate: reply only once the write is in the bucket.
	if err := a.DB().Durable(ctx); err != nil {
		panic(err)
	}
	fmt.Println("epoch", a.Epoch(), "durable through", a.DB().Stats().Durable)
	a.Release()
	// Output:
	// epoch 1 durable through 2
}

// Handler serves HTTP requests for actors: here, or forwarded once to the
// live node holding the actor.
func ExampleHost_Handler() {
	var h *host.Host // from host.New
	mux := http.NewServeMux()
	mux.Handle("/actor/{ns}/{id}/", h.Handler(host.HandlerOptions{
		Route: func(r *http.Request) (string, []byte, error) {
			return r.PathValue("ns"), []byte(r.PathValue("id")), nil
		},
		Serve: func(w http.ResponseWriter, r *http.Request, a *host.Handle) {
			// ... run the request against a.DB() ...
			if err := a.DB().Durable(r.Context()); err != nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "done in epoch", a.Epoch())
		},
	}))
	_ = &http.Server{Handler: mux}
}

// An alarm set in the transaction of the write that wants it commits with
// that write, or not at all; the reply waits for Durable as any other.
func ExampleActor_SetAlarm() {
	var a *host.Handle // from Host.Acquire
	ctx := context.Background()
	tx, err := a.Value().(*sql.DB).BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if _, err := a.SetAlarm(ctx, tx, time.Now().Add(time.Minute)); err != nil {
		panic(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO notes VALUES ('remind me')`); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	if err := a.DB().Durable(ctx); err != nil {
		panic(err)
	}
}

// A runtime registers an alarm handler per namespace. The node holding an
// actor runs its alarm when it is due; what the handler writes is durable
// before the alarm is cleared, and a handler that sets the next alarm
// (a periodic one, here until the third run) keeps it.
func ExampleAlarmFunc() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "framectl-host-alarm-")
	defer os.RemoveAll(tmp)
	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}
	ran := make(chan int64, 3)
	tick := func(ctx context.Context, a *host.Actor, run alarm.Run) error {
		pool := a.Value().(*sql.DB)
		var n int64
		if err := pool.QueryRowContext(ctx, `INSERT INTO ticks VALUES (NULL) RETURNING rowid`).Scan(&n); err != nil {
			return err // retried 2 s later, then 4 s, ...
		}
		if n < 3 {
			if _, err := a.SetAlarm(ctx, pool, run.Due.Add(10*time.Millisecond)); err != nil {
				return err
			}
		}
		ran <- n
		return nil
	}
	h, err := host.New(ctx, host.Config{
		Bucket:  b,
		Address: "127.0.0.1:8080",
		Dir:     filepath.Join(tmp, "data"),
		Hooks: host.Hooks{
			Opened: func(ctx context.Context, a *host.Actor) error {
				pool, err := sql.Open("sqlite3", a.DB().DSN())
				if err != nil {
					return err
				}
				if _, err := pool.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ticks(n INTEGER PRIMARY KEY)`); err != nil {
					pool.Close()
					return err
				}
				a.SetValue(pool)
				return nil
			},
			Closing: func(_ context.Context, a *host.Actor) { a.Value().(*sql.DB).Close() },
		},
		Alarms: map[string]host.AlarmFunc{"clock": tick},
	})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)

	a, err := h.Acquire(ctx, "clock", []byte("c-1"))
	if err != nil {
		panic(err)
	}
	if _, err := a.SetAlarm(ctx, a.Value().(*sql.DB), time.Now()); err != nil {
		panic(err)
	}
	if err := a.DB().Durable(ctx); err != nil {
		panic(err)
	}
	a.Release()
	for range 3 {
		fmt.Println("tick", <-ran)
	}
	// Output:
	// tick 1
	// tick 2
	// tick 3
}

// A runtime that keeps state in memory (here a count of events not yet
// written) opts its namespace in to a drain hook, which writes it to the
// actor's database before the actor moves to another node. On SIGTERM it
// drains: StopClaiming, its HTTP server's Shutdown, then Drain.
func ExampleHost_Drain() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "framectl-host-drain-")
	defer os.RemoveAll(tmp)
	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}
	type counter struct {
		pool    *sql.DB
		pending atomic.Int64 // events counted in memory, not written yet
	}
	h, err := host.New(ctx, host.Config{
		Bucket:  b,
		Address: "127.0.0.1:8080",
		Dir:     filepath.Join(tmp, "data"),
		Hooks: host.Hooks{
			Opened: func(ctx context.Context, a *host.Actor) error {
				pool, err := sql.Open("sqlite3", a.DB().DSN())
				if err != nil {
					return err
				}
				if _, err := pool.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS counts(n INTEGER)`); err != nil {
					pool.Close()
					return err
				}
				a.SetValue(&counter{pool: pool})
				return nil
			},
			Closing: func(_ context.Context, a *host.Actor) { a.Value().(*counter).pool.Close() },
		},
		Drain: map[string]host.DrainFunc{
			"counters": func(ctx context.Context, a *host.Actor) error {
				c := a.Value().(*counter)
				_, err := c.pool.ExecContext(ctx, `INSERT INTO counts VALUES (?)`, c.pending.Load())
				return err // the host waits for Durable itself
			},
		},
	})
	if err != nil {
		panic(err)
	}
	a, err := h.Acquire(ctx, "counters", []byte("page-views"))
	if err != nil {
		panic(err)
	}
	a.Value().(*counter).pending.Add(3)
	a.Release()

	h.StopClaiming() // then the HTTP server's Shutdown, if there is one
	report, err := h.Drain(ctx)
	if err != nil {
		panic(err)
	}
	for _, ns := range report.Namespaces {
		fmt.Printf("%s: drained %d, failed %d, timed out %d\n", ns.Namespace, ns.Drained, ns.Failed, ns.TimedOut)
	}
	// Output:
	// counters: drained 1, failed 0, timed out 0
}
