package main

// The demo's workload: an application's requests against a replicated
// database, each one acknowledged only once Durable says it is in the
// bucket (the output gate of an actor runtime).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framectl/framectl"
	"github.com/ncruces/go-sqlite3"
)

// demoSchema is one transaction: one commit.
const demoSchema = `
BEGIN;
CREATE TABLE accounts (
	id       INTEGER PRIMARY KEY,
	name     TEXT NOT NULL,
	balance  INTEGER NOT NULL, -- cents
	updated  INTEGER NOT NULL  -- Unix nanoseconds
);
CREATE TABLE orders (
	id       INTEGER PRIMARY KEY,
	account  INTEGER NOT NULL REFERENCES accounts(id),
	amount   INTEGER NOT NULL,
	created  INTEGER NOT NULL,
	note     TEXT NOT NULL
);
CREATE INDEX orders_account ON orders(account);
CREATE TABLE ledger (
	id       INTEGER PRIMARY KEY,
	src      INTEGER NOT NULL,
	dst      INTEGER NOT NULL,
	amount   INTEGER NOT NULL,
	at       INTEGER NOT NULL
);
COMMIT;`

// demoAccounts is how many accounts the first big transaction creates.
const demoAccounts = 1000

// workload describes the requests to run.
type workload struct {
	commits int // commits in all, setup included
	clients int // concurrent connections
	seed    uint64
}

// workloadResult counts what the workload did.
type workloadResult struct {
	Commits    int           `json:"commits"`    // transactions committed
	Setup      int           `json:"setup"`      // of which schema and seeding
	Inserts    int           `json:"inserts"`    // single-row INSERT requests
	Updates    int           `json:"updates"`    // single-row UPDATE requests
	Transfers  int           `json:"transfers"`  // multi-statement transactions
	Deletes    int           `json:"deletes"`    // DELETE requests
	RolledBack int           `json:"rolledBack"` // transactions rolled back (never replicated)
	Clients    int           `json:"clients"`
	Duration   time.Duration `json:"durationNs"`
	// Durable waits: how long a request waited, after its commit, for
	// Durable to confirm it is in the bucket.
	DurableMedian time.Duration `json:"durableWaitMedianNs"`
	DurableP99    time.Duration `json:"durableWaitP99Ns"`
	DurableMax    time.Duration `json:"durableWaitMaxNs"`
}

// counts is one client's share of workloadResult.
type counts struct {
	inserts, updates, transfers, deletes, rolledBack int
	waits                                            []time.Duration
}

// runWorkload runs w against db. Every request commits once and then waits
// for Durable before the client sends its next one, so several clients'
// commits share an upload (group commit) while none is acknowledged early.
func runWorkload(ctx context.Context, db *framectl.DB, w workload, p *progress) (workloadResult, error) {
	start := time.Now()
	res := workloadResult{Clients: w.clients}
	setup, err := db.Conn()
	if err != nil {
		return res, err
	}
	defer setup.Close()
	// Commit 1: the schema. Commit 2: a big transaction seeding accounts.
	if err := setup.Exec(demoSchema); err != nil {
		return res, fmt.Errorf("creating the schema: %w", err)
	}
	if err := seedAccounts(setup); err != nil {
		return res, err
	}
	res.Setup = 2
	p.add(2)
	if err := db.Durable(ctx); err != nil {
		return res, err
	}

	var (
		remaining atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		total     counts
		firstErr  error
	)
	remaining.Store(int64(w.commits - res.Setup))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range w.clients {
		wg.Go(func() {
			c, err := client(ctx, db, w.seed+uint64(i), &remaining, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("client %d: %w", i, err)
				cancel()
			}
			total.inserts += c.inserts
			total.updates += c.updates
			total.transfers += c.transfers
			total.deletes += c.deletes
			total.rolledBack += c.rolledBack
			total.waits = append(total.waits, c.waits...)
		})
	}
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	// Fold the WAL into the database file, so that the file can be
	// compared byte for byte with a restored copy.
	if err := setup.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return res, fmt.Errorf("checkpoint: %w", err)
	}
	res.Inserts, res.Updates, res.Transfers, res.Deletes = total.inserts, total.updates, total.transfers, total.deletes
	res.RolledBack = total.rolledBack
	res.Commits = res.Setup + res.Inserts + res.Updates + res.Transfers + res.Deletes
	res.Duration = time.Since(start)
	slices.Sort(total.waits)
	if n := len(total.waits); n > 0 {
		res.DurableMedian = total.waits[n/2]
		res.DurableP99 = total.waits[min(n-1, n*99/100)]
		res.DurableMax = total.waits[n-1]
	}
	return res, nil
}

func seedAccounts(c *sqlite3.Conn) error {
	if err := c.Exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	s, _, err := c.Prepare("INSERT INTO accounts (id, name, balance, updated) VALUES (?, ?, ?, ?)")
	if err != nil {
		c.Exec("ROLLBACK")
		return err
	}
	defer s.Close()
	now := time.Now().UnixNano()
	for id := 1; id <= demoAccounts; id++ {
		s.BindInt(1, id)
		s.BindText(2, fmt.Sprintf("account-%04d", id))
		s.BindInt64(3, 100_000)
		s.BindInt64(4, now)
		if err := s.Exec(); err != nil {
			c.Exec("ROLLBACK")
			return fmt.Errorf("seeding accounts: %w", err)
		}
	}
	return c.Exec("COMMIT")
}

// client sends requests until the shared budget of commits is spent.
func client(ctx context.Context, db *framectl.DB, seed uint64, remaining *atomic.Int64, p *progress) (counts, error) {
	var n counts
	c, err := db.Conn()
	if err != nil {
		return n, err
	}
	defer c.Close()
	stmts := map[string]string{
		"insert":  "INSERT INTO orders (account, amount, created, note) VALUES (?, ?, ?, ?)",
		"update":  "UPDATE accounts SET balance = balance + ?, updated = ? WHERE id = ?",
		"debit":   "UPDATE accounts SET balance = balance - ?2, updated = ?3 WHERE id = ?1",
		"credit":  "UPDATE accounts SET balance = balance + ?2, updated = ?3 WHERE id = ?1",
		"ledger":  "INSERT INTO ledger (src, dst, amount, at) VALUES (?, ?, ?, ?)",
		"delete":  "DELETE FROM orders WHERE id IN (SELECT id FROM orders WHERE account = ? ORDER BY id LIMIT 1)",
		"discard": "INSERT INTO orders (account, amount, created, note) VALUES (?, 0, ?, 'rolled back')",
	}
	ps := map[string]*sqlite3.Stmt{}
	for name, sql := range stmts {
		s, _, err := c.Prepare(sql)
		if err != nil {
			return n, fmt.Errorf("%s: %w", name, err)
		}
		defer s.Close()
		ps[name] = s
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	account := func() int64 { return 1 + rng.Int64N(demoAccounts) }
	exec := func(name string, args ...any) error {
		s := ps[name]
		for i, a := range args {
			switch v := a.(type) {
			case int64:
				s.BindInt64(i+1, v)
			case string:
				s.BindText(i+1, v)
			}
		}
		if err := s.Exec(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	tx := func(body func() error) error {
		if err := c.Exec("BEGIN IMMEDIATE"); err != nil {
			return err
		}
		if err := body(); err != nil {
			c.Exec("ROLLBACK")
			return err
		}
		return c.Exec("COMMIT")
	}
	for remaining.Add(-1) >= 0 {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		now := time.Now().UnixNano()
		var err error
		switch r := rng.IntN(100); {
		case r < 55:
			note := strings.Repeat("lorem ipsum ", 1+rng.IntN(16))
			err = exec("insert", account(), rng.Int64N(50_000), now, note)
			n.inserts++
		case r < 80:
			err = exec("update", rng.Int64N(2_000)-1_000, now, account())
			n.updates++
		case r < 93:
			src, dst, amount := account(), account(), 1+rng.Int64N(10_000)
			err = tx(func() error {
				if err := exec("debit", src, amount, now); err != nil {
					return err
				}
				if err := exec("credit", dst, amount, now); err != nil {
					return err
				}
				return exec("ledger", src, dst, amount, now)
			})
			n.transfers++
		default:
			if err = exec("delete", account()); err == nil && c.Changes() == 0 {
				// Nothing to delete: no commit. Try another request.
				remaining.Add(1)
				continue
			}
			n.deletes++
		}
		if err != nil {
			return n, err
		}
		// The output gate: the reply waits until the commit is durable.
		t := time.Now()
		if err := db.Durable(ctx); err != nil {
			return n, err
		}
		n.waits = append(n.waits, time.Since(t))
		p.add(1)
		// Now and then a request fails half way and rolls back: nothing
		// of it may reach the bucket.
		if rng.IntN(200) == 0 {
			if err := c.Exec("BEGIN IMMEDIATE"); err != nil {
				return n, err
			}
			if err := exec("discard", account(), now); err != nil {
				return n, err
			}
			if err := c.Exec("ROLLBACK"); err != nil {
				return n, err
			}
			n.rolledBack++
		}
	}
	return n, nil
}
