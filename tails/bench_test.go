package tails

import (
	"fmt"
	"testing"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/frames"
)

// One commit of 4 KiB through Handle on a tail kept at a constant size
// (the durable point trails by the tail's length): "append" is the
// store's way, a change record and one fsync; "whole" makes every
// message a reset of a new epoch, so each Save writes the whole state
// (and the file is then rewritten, its dead part past its live part), as
// a store rewriting its state per message would. Measured (-benchtime
// 200x): append 0.51, 0.54 and 0.73 ms a commit for tails of 64 KiB,
// 1 MiB and 16 MiB; whole 1.3, 6.0 and 76 ms.
func BenchmarkHandle(b *testing.B) {
	const body = 4 << 10
	for _, tail := range []int{64 << 10, 1 << 20, 16 << 20} {
		n := tail / (body + 28)
		for _, mode := range []string{"append", "whole"} {
			b.Run(fmt.Sprintf("tail=%dKiB/%s", tail>>10, mode), func(b *testing.B) {
				s := openTest(b, b.TempDir(), Config{Limits: follow.Limits{MaxTailBytes: int64(2 * tail)}}, minRewriteBytes)
				defer s.Close()
				es := branchEntries(0, n, 0, body)
				for i := range es {
					es[i].Body = es[i].Body[:cap(es[i].Body)]
				}
				if _, err := s.Handle("x", &follow.Append{Epoch: 1, Reset: true, Entries: es}); err != nil {
					b.Fatal(err)
				}
				end, epoch := frames.Seq(n), frames.Epoch(1)
				e := branchEntry(1, 0, body)
				b.SetBytes(int64(body))
				b.ReportAllocs()
				for b.Loop() {
					next := follow.Entry{Seq: end + 1, Before: branchPoint(end, 0).Chain, After: branchPoint(end+1, 0).Chain, Body: e.Body}
					durable := branchPoint(end+1-frames.Seq(n), 0)
					var m follow.Message
					if mode == "append" {
						m = &follow.Append{Epoch: epoch, Prev: branchPoint(end, 0), Durable: durable, Entries: []follow.Entry{next}}
					} else {
						st, _ := s.Load("x")
						epoch++
						m = &follow.Append{Epoch: epoch, Reset: true, Prev: durable, Durable: durable, Entries: append(st.Entries[1:len(st.Entries):len(st.Entries)], next)}
					}
					reply, err := s.Handle("x", m)
					if _, ok := reply.(*follow.Ack); err != nil || !ok {
						b.Fatalf("%+v, %v", reply, err)
					}
					end++
				}
			})
		}
	}
}

// A tail of one 4 KiB commit (the bucket keeping up): every commit makes
// the file's dead part larger than its live part, so the rewrite
// threshold alone decides how often a file is rewritten (the measurement
// behind minRewriteBytes).
func BenchmarkRewriteThreshold(b *testing.B) {
	const body = 4 << 10
	for _, min := range []int64{0, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("min=%dKiB", min>>10), func(b *testing.B) {
			s := openTest(b, b.TempDir(), Config{}, min)
			defer s.Close()
			e := branchEntry(1, 0, body)
			e.Body = e.Body[:cap(e.Body)]
			if _, err := s.Handle("x", &follow.Append{Epoch: 1, Reset: true, Entries: []follow.Entry{e}}); err != nil {
				b.Fatal(err)
			}
			end := frames.Seq(1)
			b.SetBytes(body)
			for b.Loop() {
				next := follow.Entry{Seq: end + 1, Before: branchPoint(end, 0).Chain, After: branchPoint(end+1, 0).Chain, Body: e.Body}
				m := &follow.Append{Epoch: 1, Prev: branchPoint(end, 0), Durable: branchPoint(end, 0), Entries: []follow.Entry{next}}
				if reply, err := s.Handle("x", m); err != nil {
					b.Fatal(reply, err)
				}
				end++
			}
		})
	}
}
