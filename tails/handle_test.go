package tails

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/framectl/framectl/follow"
)

// Random message sequences for several actors through Handle, the store
// closed and reopened now and then and its files rewritten often, give
// the replies and states an in-memory follow.Follower gives for the same
// messages; after every reopen, Load reads back exactly the follower's
// state. With MaxOpen 2 and three actors, actors leave memory and come
// back from their files. TAILS_SEEDS=n runs n seeds (default 20).
func TestHandleMatchesFollower(t *testing.T) {
	seeds := 20
	if s := os.Getenv("TAILS_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TAILS_SEEDS=%q: want a positive count", s)
		}
		seeds = n
	}
	var rewrites, reopens, acks int
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r, o, a := handleRun(t, uint64(seed))
			rewrites, reopens, acks = rewrites+r, reopens+o, acks+a
		})
	}
	t.Logf("%d seeds: %d acks, %d reopens, %d rewrites", seeds, acks, reopens, rewrites)
	// A run that stopped exercising these would check nothing of them.
	if rewrites == 0 || reopens == 0 || acks == 0 {
		t.Fatalf("rewrites %d, reopens %d, acks %d: all must happen", rewrites, reopens, acks)
	}
}

func handleRun(t *testing.T, seed uint64) (rewrites, reopens, acks int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	lim := follow.Limits{MaxTailBytes: 12 << 10}
	cfg := Config{Limits: lim, MaxOpen: 2, CacheBytes: 64 << 10}
	dir := t.TempDir()
	s := openTest(t, dir, cfg, 4<<10)
	defer func() { s.Close() }()
	actors := []string{"a", "actor-b", string([]byte{0, 0xff, 'c'})}
	refs := map[string]*follow.Follower{}
	for _, a := range actors {
		refs[a] = follow.NewFollower(lim)
	}
	g := &gen{rng: rng, maxBody: 1500}
	inodes := map[string]os.FileInfo{}
	for step := range 400 {
		actor := actors[rng.IntN(len(actors))]
		ref := refs[actor]
		m := g.next(ref.State())
		want := ref.Handle(m)
		got, err := s.Handle(actor, m)
		if err != nil {
			t.Fatalf("step %d: Handle: %v", step, err)
		}
		sameReply(t, got, want, step)
		if _, ok := got.(*follow.Ack); ok {
			acks++
		}
		st, err := s.Load(actor)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, st, ref.State(), "step %d: Load", step)
		if info, err := os.Stat(s.tailPath(actor)); err == nil {
			if old := inodes[actor]; old != nil && !os.SameFile(old, info) {
				rewrites++
			}
			inodes[actor] = info
		}
		if rng.IntN(25) == 0 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, dir, cfg, 4<<10)
			reopens++
			for _, a := range actors {
				st, err := s.Load(a)
				if err != nil {
					t.Fatalf("step %d: reopened: %v", step, err)
				}
				sameState(t, st, refs[a].State(), "step %d: actor %q reopened", step, a)
			}
		}
	}
	return rewrites, reopens, acks
}

// Actors handled at once from several goroutines, more of them than stay
// open, each end as their own follower does (run under -race too).
func TestConcurrentActors(t *testing.T) {
	lim := follow.Limits{MaxTailBytes: 12 << 10}
	cfg := Config{Limits: lim, MaxOpen: 2, CacheBytes: 16 << 10}
	dir := t.TempDir()
	s := openTest(t, dir, cfg, 4<<10)
	const actors = 6
	refs := make([]*follow.Follower, actors)
	errs := make(chan error, actors)
	for i := range actors {
		refs[i] = follow.NewFollower(lim)
		go func() {
			g := &gen{rng: rand.New(rand.NewPCG(uint64(i), 9)), maxBody: 800}
			name := fmt.Sprintf("actor-%d", i)
			for step := range 150 {
				m := g.next(refs[i].State())
				want := refs[i].Handle(m)
				got, err := s.Handle(name, m)
				if err == nil {
					if _, err = s.Actors(); err == nil {
						_, err = s.Load(fmt.Sprintf("actor-%d", (i+1)%actors))
					}
				}
				if err != nil {
					errs <- err
					return
				}
				g1, _ := follow.AppendMessage(nil, got, lim)
				w1, _ := follow.AppendMessage(nil, want, lim)
				if (got == nil) != (want == nil) || string(g1) != string(w1) {
					errs <- fmt.Errorf("%s step %d: reply %+v, want %+v", name, step, got, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range actors {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, cfg, 4<<10)
	defer s.Close()
	for i := range actors {
		st, err := s.Load(fmt.Sprintf("actor-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, st, refs[i].State(), "actor %d reopened", i)
	}
}
