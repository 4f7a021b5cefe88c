package follow

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/framectl/framectl/frames"
)

func newTakeover(t *testing.T, epoch frames.Epoch, q int, set []FollowerID, bucket Point) *Takeover {
	t.Helper()
	tk, err := NewTakeover(TakeoverConfig{Epoch: epoch, Quorum: q, Followers: set, Bucket: bucket, Wait: time.Second, Retransmit: 100 * time.Millisecond}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// answer feeds the takeover promises as followers with these logs would
// give them.
func answer(tk *Takeover, epoch frames.Epoch, logs map[FollowerID]*Promise) {
	for _, id := range slices.Sorted(func(yield func(FollowerID) bool) {
		for id := range logs {
			if !yield(id) {
				return
			}
		}
	}) {
		p := *logs[id]
		p.Epoch = epoch
		tk.Receive(id, &p)
	}
}

func mustRecover(t *testing.T, tk *Takeover) Recovery {
	t.Helper()
	r, err, done := tk.Done()
	if !done || err != nil {
		t.Fatalf("takeover: done %v, %v", done, err)
	}
	return r
}

// n-q+1 answers and no fewer: with n=5, q=3 the third answer completes it.
func TestTakeoverWaitsForNMinusQPlusOne(t *testing.T) {
	set := []FollowerID{"a", "b", "c", "d", "e"}
	tk := newTakeover(t, 2, 3, set, Point{})
	if got := len(tk.Outbox()); got != 5 {
		t.Fatalf("%d fences queued, want 5", got)
	}
	tk.Receive("a", &Promise{Epoch: 2})
	tk.Receive("a", &Promise{Epoch: 2}) // a copy counts once
	tk.Receive("x", &Promise{Epoch: 2}) // not of the set
	tk.Receive("b", &Promise{Epoch: 1}) // of another epoch
	if _, _, done := tk.Done(); done {
		t.Fatal("done with one answer")
	}
	tk.Receive("b", &Promise{Epoch: 2})
	if _, _, done := tk.Done(); done {
		t.Fatal("done with two answers of the three needed")
	}
	tk.Tick(t0.Add(150 * time.Millisecond))
	if got := len(tk.Outbox()); got != 3 {
		t.Fatalf("%d fences re-sent, want 3 (to c, d, e)", got)
	}
	tk.Receive("d", &Promise{Epoch: 2})
	if r := mustRecover(t, tk); len(r.Tail) != 0 || r.Epoch != 2 {
		t.Fatalf("recovery %+v", r)
	}
}

// Past the wait with too few answers, the takeover fails and says who
// answered; it never picks from fewer.
func TestTakeoverTooFewAnswers(t *testing.T) {
	tk := newTakeover(t, 2, 2, abc, Point{})
	tk.Receive("b", &Promise{Epoch: 2, LogEpoch: 1, Entries: entries(Point{}, 2, 1)})
	tk.Tick(t0.Add(999 * time.Millisecond))
	if _, _, done := tk.Done(); done {
		t.Fatal("done before the wait ran out")
	}
	tk.Tick(t0.Add(time.Second))
	_, err, done := tk.Done()
	var tf *TooFewAnswersError
	if !done || !errors.As(err, &tf) || tf.Need != 2 || !slices.Equal(tf.Answered, []FollowerID{"b"}) {
		t.Fatalf("done %v, %v", done, err)
	}
	tk.Receive("c", &Promise{Epoch: 2})
	if _, err2, _ := tk.Done(); err2 != err {
		t.Fatal("an answer after the failure changed the outcome")
	}
}

// The newest log epoch wins over a longer log of an older one: the older
// owner's extra commits were never acknowledged, the newer owner's may
// have been.
func TestTakeoverNewestLogEpochWins(t *testing.T) {
	common := entries(Point{}, 2, 1)
	zombie := append(slices.Clone(common), entries(common[1].Point(), 5, 1)...)
	newer := append(slices.Clone(common), entries(common[1].Point(), 2, 2)...)
	tk := newTakeover(t, 4, 2, abc, Point{})
	answer(tk, 4, map[FollowerID]*Promise{"a": {LogEpoch: 2, Entries: zombie}, "b": {LogEpoch: 3, Entries: newer}})
	r := mustRecover(t, tk)
	if r.From != "b" || !slices.EqualFunc(r.Tail, newer, func(x, y Entry) bool { return x.Point() == y.Point() }) {
		t.Fatalf("recovered %d entries from %q, want b's 4", len(r.Tail), r.From)
	}
	// Of one log epoch, the longest.
	tk = newTakeover(t, 4, 2, abc, Point{})
	answer(tk, 4, map[FollowerID]*Promise{"a": {LogEpoch: 3, Entries: newer[:3]}, "c": {LogEpoch: 3, Entries: newer}})
	if r := mustRecover(t, tk); r.From != "c" || len(r.Tail) != 4 {
		t.Fatalf("recovered %d entries from %q, want c's 4", len(r.Tail), r.From)
	}
}

// Logs are taken past the bucket's durable point only where they hold it
// with the bucket's chain value.
func TestTakeoverBucketPoint(t *testing.T) {
	es := entries(Point{}, 6, 1)
	bucket := es[3].Point()
	branch := append(slices.Clone(es[:2]), entries(es[1].Point(), 4, 2)...)

	// A log behind the bucket gives nothing; one that chains from it gives
	// what is past it; a newer log on a branch the bucket superseded is
	// passed over.
	tk := newTakeover(t, 5, 2, abc, bucket)
	answer(tk, 5, map[FollowerID]*Promise{
		"a": {LogEpoch: 4, Entries: branch},
		"b": {LogEpoch: 3, Base: es[1].Point(), Entries: es[2:]},
		"c": {LogEpoch: 4, Entries: es[:3]},
	})
	r := mustRecover(t, tk)
	if r.From != "b" || r.Base != bucket || len(r.Tail) != 2 || r.Tail[0].Seq != 5 {
		t.Fatalf("recovered %d entries from %q after %d", len(r.Tail), r.From, r.Base.Seq)
	}

	// Only logs behind the bucket, or on a superseded branch: the bucket
	// alone.
	tk = newTakeover(t, 5, 2, abc, bucket)
	answer(tk, 5, map[FollowerID]*Promise{"a": {LogEpoch: 4, Entries: branch}, "c": {LogEpoch: 4, Entries: es[:3]}})
	if r := mustRecover(t, tk); len(r.Tail) != 0 || r.From != "" || r.Base != bucket {
		t.Fatalf("recovered %d entries from %q", len(r.Tail), r.From)
	}
}

// What no correct run produces stops the takeover: a log that starts past
// the bucket's durable point, two logs of one epoch that disagree, a log of
// the takeover's own epoch.
func TestTakeoverDiverged(t *testing.T) {
	es := entries(Point{}, 5, 1)
	other := append(slices.Clone(es[:2]), entries(es[1].Point(), 2, 2)...)
	for name, logs := range map[string]map[FollowerID]*Promise{
		"base past the bucket": {"a": {LogEpoch: 3, Base: es[2].Point(), Entries: es[3:]}, "b": {}},
		"one epoch, two logs":  {"a": {LogEpoch: 3, Entries: es}, "b": {LogEpoch: 3, Entries: other}},
		"own epoch":            {"a": {LogEpoch: 5, Entries: es}},
	} {
		tk := newTakeover(t, 5, 2, abc, es[1].Point())
		answer(tk, 5, logs)
		var de *DivergedError
		if _, err, done := tk.Done(); !done || !errors.As(err, &de) || (de.Follower != "a" && de.Other != "a") {
			t.Errorf("%s: done %v, %v", name, done, err)
		}
	}
}

// A newer epoch's refusal ends the takeover; an answer whose log is not a
// chain is not counted.
func TestTakeoverSupersededAndBroken(t *testing.T) {
	tk := newTakeover(t, 3, 2, abc, Point{})
	es := entries(Point{}, 3, 1)
	es[2].Before ^= 1
	tk.Receive("a", &Promise{Epoch: 3, LogEpoch: 2, Entries: es})
	tk.Receive("b", &Promise{Epoch: 3})
	if _, _, done := tk.Done(); done {
		t.Fatal("an unchained answer was counted")
	}
	tk.Receive("c", &Refuse{Epoch: 3, Reason: RefuseStale, Newest: 4})
	var se *SupersededError
	if _, err, done := tk.Done(); !done || !errors.As(err, &se) || se.Newer != 4 || se.By != "c" {
		t.Fatalf("done %v, %v", done, err)
	}
}
