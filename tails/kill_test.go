package tails

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
	"github.com/framectl/framectl/internal/killtest"
)

// The kill test's child: TestMain runs killChild instead of the tests
// when envKillDir names a store directory.
const (
	envKillDir  = "TAILS_KILL_CHILD_DIR"
	envKillSeed = "TAILS_KILL_CHILD_SEED"
	// envKills sets the number of kills of TestAcknowledgedSurvivesSIGKILL
	// (by hand: TAILS_KILLS=200 go test ./tails -run SIGKILL -v).
	envKills = "TAILS_KILLS"

	killActor   = "killed"
	killMaxBody = 3000
)

var killLimits = follow.Limits{MaxTailBytes: 256 << 10}

func TestMain(m *testing.M) { killtest.Main(m, envKillDir, killChild) }

// killChild opens the store, takes over the actor's log as a new owner
// would (a reset of the next epoch carrying what the store holds), then
// appends commits of history branch 0 until it is killed, the durable
// point trailing by up to 10 commits (so the log is trimmed and the file
// rewritten often). It prints
//
//	ACK <epoch> <end seq> <rewrites>   Handle acknowledged the log through
//	                                   end seq; the file was rewritten so
//	                                   many times so far (its inode changed)
func killChild(dir string) error {
	s, err := Open(dir, Config{Limits: killLimits})
	if err != nil {
		return err
	}
	s.rewriteMin = 16 << 10
	seed, _ := strconv.ParseUint(os.Getenv(envKillSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 3))
	st, err := s.Load(killActor)
	if err != nil {
		return err
	}
	epoch := st.Promised + 1
	out := bufio.NewWriter(os.Stdout)
	var inode os.FileInfo
	rewrites := 0
	send := func(m follow.Message) error {
		reply, err := s.Handle(killActor, m)
		if err != nil {
			return err
		}
		ack, ok := reply.(*follow.Ack)
		if !ok {
			return fmt.Errorf("reply %T %+v", reply, reply)
		}
		info, err := os.Stat(s.tailPath(killActor))
		if err != nil {
			return err
		}
		if inode != nil && !os.SameFile(inode, info) {
			rewrites++
		}
		inode = info
		fmt.Fprintf(out, "ACK %d %d %d\n", epoch, ack.End.Seq, rewrites)
		return out.Flush()
	}
	if err := send(&follow.Append{Epoch: epoch, Reset: true, Prev: st.Base, Durable: st.Base, Entries: st.Entries}); err != nil {
		return err
	}
	end := st.End().Seq
	for {
		n := 1 + rng.IntN(3)
		durable := st.Base
		if end > 10 {
			durable = branchPoint(end-frames.Seq(rng.IntN(10)), 0)
		}
		if err := send(&follow.Append{Epoch: epoch, Prev: branchPoint(end, 0), Durable: durable, Entries: branchEntries(end, n, 0, killMaxBody)}); err != nil {
			return err
		}
		end += frames.Seq(n)
	}
}

// A child process appends through Handle, printing what it acknowledged,
// and is killed (SIGKILL) at a random moment, again and again on one
// store: each time, the store reopens holding every acknowledged commit,
// each the very commit (its chain values and body), and the promise of
// the child's epoch. While the child runs, Open of its directory fails
// with ErrLocked.
func TestAcknowledgedSurvivesSIGKILL(t *testing.T) {
	kills := 6
	if s := os.Getenv(envKills); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", envKills, s)
		}
		kills = n
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	inRewrite := 0 // kills that left a rewrite unfinished
	totalRewrites := 0
	for k := range kills {
		var lastEpoch frames.Epoch
		var lastEnd uint64
		rewrites := 0
		checkedLock := false
		child := killtest.Start(t, fmt.Sprintf("kill %d", k), envKillDir+"="+dir, envKillSeed+"="+strconv.Itoa(k))
		child.Kill(nil, func(line string, killed bool) <-chan time.Time {
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "ACK" {
				if !killed {
					t.Fatalf("kill %d: child printed %q", k, line)
				}
				return nil // cut off by the kill
			}
			lastEpoch, _ = frames.ParseEpoch(f[1])
			lastEnd, _ = strconv.ParseUint(f[2], 10, 64)
			rewrites, _ = strconv.Atoi(f[3])
			if checkedLock {
				return nil
			}
			checkedLock = true
			if _, err := Open(dir, Config{}); !errors.Is(err, ErrLocked) {
				t.Fatalf("kill %d: Open while the child runs: %v, want ErrLocked", k, err)
			}
			return time.After(time.Duration(20+rng.IntN(400)) * time.Millisecond)
		})
		totalRewrites += rewrites
		if _, err := os.Stat(filepath.Join(dir, fileName(killActor)+tmpSuffix)); err == nil {
			inRewrite++
		}
		s, err := Open(dir, Config{Limits: killLimits})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		st, err := s.Load(killActor)
		s.Close()
		if err != nil {
			t.Fatalf("kill %d: Load: %v", k, err)
		}
		if st.Promised < lastEpoch || st.End().Seq < frames.Seq(lastEnd) {
			t.Fatalf("kill %d: holds epoch %d through seq %d; the child acknowledged epoch %d through %d", k, st.Promised, st.End().Seq, lastEpoch, lastEnd)
		}
		if st.Base != branchPoint(st.Base.Seq, 0) {
			t.Fatalf("kill %d: base %+v is not of the history", k, st.Base)
		}
		for _, e := range st.Entries {
			if diffState(follow.State{Entries: []follow.Entry{e}}, follow.State{Entries: []follow.Entry{branchEntry(e.Seq, 0, killMaxBody)}}) != nil {
				t.Fatalf("kill %d: entry %d is not the commit acknowledged", k, e.Seq)
			}
		}
		t.Logf("kill %d: acknowledged epoch %d through %d; holds %d..%d", k, lastEpoch, lastEnd, st.Base.Seq, st.End().Seq)
	}
	t.Logf("%d kills, %d of them during a rewrite; %d rewrites acknowledged after", kills, inRewrite, totalRewrites)
	if totalRewrites == 0 {
		t.Fatal("no file was rewritten: kills never came after a rewrite")
	}
}
