package conntap

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// What is written reaches the other end unchanged and is kept: Written
// returns all of it and keeps it, Take returns it and forgets it.
func TestKeepsWhatIsWritten(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &Conn{Conn: a}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 11)
		_, err := io.ReadFull(b, buf)
		if err != nil {
			buf = nil
		}
		got <- buf
	}()
	for _, s := range []string{"hello", " world"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if g := <-got; string(g) != "hello world" {
		t.Fatalf("the other end read %q, want %q", g, "hello world")
	}
	w := c.Written()
	if string(w) != "hello world" {
		t.Fatalf("Written: %q", w)
	}
	w[0] = 'J' // a copy: the caller's edit does not reach what is kept
	if !bytes.Equal(c.Take(), []byte("hello world")) {
		t.Fatal("Take did not return what Written did")
	}
	if w := c.Written(); len(w) != 0 {
		t.Fatalf("after Take, Written: %q", w)
	}
}
