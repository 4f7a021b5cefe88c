package tails_test

import (
	"fmt"
	"log"
	"os"

	"github.com/framectl/framectl/follow"
	"github.com/framectl/framectl/tails"
)

// A follower node hands each message for an actor it follows to
// Store.Handle and sends the reply it returns, which reports only what is
// on disk. After a restart, the store gives the same state back.
func Example() {
	dir, _ := os.MkdirTemp("", "tails-example")
	defer os.RemoveAll(dir)

	s, err := tails.Open(dir, tails.Config{})
	if err != nil {
		log.Fatal(err)
	}
	e1 := follow.Entry{Seq: 1, Before: 0, After: 0x1111, Body: []byte("commit 1")}
	e2 := follow.Entry{Seq: 2, Before: 0x1111, After: 0x2222, Body: []byte("commit 2")}
	reply, err := s.Handle("chat/room-7", &follow.Append{Epoch: 4, Reset: true, Entries: []follow.Entry{e1}})
	if err != nil {
		log.Fatal(err) // reply is then a refusal as full, to be sent all the same
	}
	fmt.Printf("%T through seq %d\n", reply, reply.(*follow.Ack).End.Seq)
	reply, _ = s.Handle("chat/room-7", &follow.Append{Epoch: 4, Prev: e1.Point(), Entries: []follow.Entry{e2}})
	fmt.Printf("%T through seq %d\n", reply, reply.(*follow.Ack).End.Seq)
	s.Close()

	s, _ = tails.Open(dir, tails.Config{})
	defer s.Close()
	st, _ := s.Load("chat/room-7")
	fmt.Printf("reopened: promised epoch %d, log of epoch %d through seq %d\n", st.Promised, st.LogEpoch, st.End().Seq)
	// Output:
	// *follow.Ack through seq 1
	// *follow.Ack through seq 2
	// reopened: promised epoch 4, log of epoch 4 through seq 2
}
