package restore

import (
	"context"
	"errors"
	"fmt"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/fence"
	"github.com/framectl/framectl/frames"
)

// checkOwn reads own.json and checks it against the bucket.
func (v *verifier) checkOwn(ctx context.Context) (*fence.Record, error) {
	key := v.a.OwnKey()
	problem := func(sev Severity, format string, args ...any) {
		v.add(Problem{Key: key, Kind: KindOwn, Severity: sev, Message: fmt.Sprintf(format, args...)})
	}
	if v.inv.Own == nil {
		problem(Warning, "absent: the actor has no ownership record (its sessions were written without package fence)")
		return nil, nil
	}
	rec, info, err := fence.ReadRecord(ctx, v.b, v.a)
	switch {
	case errors.Is(err, bucket.ErrNotFound):
		problem(Warning, "absent: deleted since the listing")
		return nil, nil
	case errors.Is(err, frames.ErrDamage): // fence.ErrBadRecord
		problem(Damage, "unreadable: %v", err)
		return nil, nil
	case err != nil:
		return nil, err
	}
	v.rep.Objects++
	v.rep.Bytes += info.Size
	if len(v.inv.Sessions) > 0 {
		if newest := v.inv.Sessions[0].Epoch; rec.Epoch < newest {
			problem(Damage, "names epoch %d, but session %d exists: nothing writes a session newer than its claim", rec.Epoch, newest)
			return nil, nil
		}
	}
	_, hasSession := v.inv.Session(rec.Epoch)
	leaseGone := false
	if !rec.Released() {
		// The holder's lease must exist and agree on the address: a
		// record altered into another valid one (a flipped bit in the
		// address) is caught here.
		leaseKey := frames.NodeKey(rec.Node)
		lease, _, err := fence.ReadLease(ctx, v.b, rec.Node)
		switch {
		case errors.Is(err, bucket.ErrNotFound):
			// A node that stopped without releasing leaves its record
			// behind; its lease goes when it deregisters or is swept
			// (fence.SweepLeases). Verify cannot tell that from a
			// flipped node ID, so it says both.
			leaseGone = true
			problem(Warning, "held by node %q, whose lease %s is gone (swept after the node stopped, or the node deregistered "+
				"without releasing): the actor stays held by a node whose lease is gone until another node claims it; "+
				"if a node is still writing session %d, own.json is damaged", rec.Node, leaseKey, rec.Epoch)
		case errors.Is(err, frames.ErrDamage): // fence.ErrBadLease
			v.add(Problem{Key: leaseKey, Kind: KindOwn, Severity: Damage,
				Message: fmt.Sprintf("the lease of the node %s names is unreadable: %v", key, err)})
		case err != nil:
			return nil, err
		case lease.Address != rec.Address:
			problem(Damage, "names node %q at %s, but its lease says %s", rec.Node, rec.Address, lease.Address)
		}
	}
	// A released record says where the actor's history ended: the newest
	// session at or below its epoch must end exactly there. Short of it,
	// its tail was lost; past it, the record is damaged (nothing writes a
	// session after its release: Release follows the final flush).
	tailLost := false
	if s, ok := v.inv.NewestWithSnapshot(); rec.Released() && rec.Seq > 0 && (!ok || s.Epoch <= rec.Epoch) {
		var (
			last  frames.Seq
			epoch frames.Epoch
		)
		if ok {
			last, epoch = s.LastSeq(), s.Epoch
		}
		switch {
		case last < rec.Seq:
			tailLost = true
			e := &TailError{Key: key, Epoch: epoch, ReachedSeq: last, EndSeq: rec.Seq}
			gap := e.Gap()
			v.add(Problem{Key: key, Kind: KindGap, Severity: Damage, Epoch: epoch, From: gap.From, To: gap.To, Message: e.Error()})
		case last > rec.Seq:
			problem(Damage, "records the actor's history released at seq %d, but session %d reaches seq %d: the record is damaged, "+
				"or objects were written after the release", rec.Seq, epoch, last)
		}
	}
	switch {
	case hasSession, tailLost:
	case rec.Released():
		// framectl.Open claims, then restores and writes the session's first
		// snapshot; when that fails it releases the claim, epoch kept.
		problem(Warning, "released at epoch %d, which has no objects: a claim whose open failed before its first snapshot "+
			"gave the actor back; harmless: restore reads the newest session with a snapshot, the next claim takes epoch %d",
			rec.Epoch, rec.Epoch+1)
	case leaseGone:
		problem(Warning, "held at epoch %d, which has no objects, by a node whose lease is gone: a claim whose node "+
			"stopped before its first snapshot; restore reads the newest session with a snapshot", rec.Epoch)
	default:
		// A live holder's epoch without objects is a claim still
		// opening, or a flipped digit of the epoch: nothing else in the
		// bucket tells them apart, and the second must not pass.
		problem(Damage, "names session %d, which has no objects although its holder has a lease: a claim still opening "+
			"(verify again once it wrote its first snapshot), or a damaged epoch", rec.Epoch)
	}
	v.rep.Own = &rec
	return &rec, nil
}

// currentSession is the session Restore would choose, ignoring an own.json
// that is damaged or disagrees with the bucket; sessions newer than it
// that hold batches are reported.
func (v *verifier) currentSession(own *fence.Record) *Session {
	inv := v.inv
	var cur *Session
	if own != nil {
		if s, ok := inv.Session(own.Epoch); ok && len(s.Snapshots) > 0 {
			cur = s
		}
	}
	if cur == nil {
		cur, _ = inv.NewestWithSnapshot()
	}
	for i := range inv.Sessions {
		s := &inv.Sessions[i]
		if (cur == nil || s.Epoch > cur.Epoch) && len(s.Batches) > 0 {
			v.add(Problem{Key: s.Batches[0].Key, Kind: KindGap, Severity: Damage, Epoch: s.Epoch, From: 1, To: s.Batches[0].Seq,
				Message: fmt.Sprintf("session %d holds %d batches but no snapshot: its frames cannot be restored", s.Epoch, len(s.Batches))})
		}
	}
	return cur
}
