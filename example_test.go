package framectl_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3" for database/sql

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/session"
)

// An actor runtime opens one replicated database per actor, writes through
// database/sql, and holds its reply until Durable says the write is in the
// bucket.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "framectl-example-")
	defer os.RemoveAll(tmp)

	b, err := bucket.Open(ctx, "file://"+filepath.Join(tmp, "bucket"))
	if err != nil {
		panic(err)
	}
	db, err := framectl.Open(ctx, session.Config{
		Bucket:    b,
		Namespace: "chat",
		Actor:     []byte("room-42"),
		Epoch:     1, // from package fence in a multi-node runtime
		Dir:       filepath.Join(tmp, "room-42"),
	})
	if err != nil {
		panic(err)
	}
	defer db.Close(ctx)

	sqldb, err := sql.Open("sqlite3", db.DSN())
	if err != nil {
		panic(err)
	}
	defer sqldb.Close()
	if _, err := sqldb.ExecContext(ctx, `CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)`); err != nil {
		panic(err)
	}
	for _, note := range []string{"hello", "world"} {
		if _, err := sqldb.ExecContext(ctx, `INSERT INTO notes(body) VALUES(?)`, note); err != nil {
			panic(err)
		}
	}
	// The output gate: reply only once the writes are durable.
	if err := db.Durable(ctx); err != nil {
		panic(err)
	}
	st := db.Stats()
	fmt.Printf("commits %d, durable through sequence %d\n", st.Commits, st.Durable)
	// Output:
	// commits 3, durable through sequence 3
}
