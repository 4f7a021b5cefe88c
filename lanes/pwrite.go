package lanes

import (
	"os"

	"github.com/framectl/framectl/frames"
)

// Writing pages: one pwrite per run of consecutive page numbers, because
// for small pages the syscall, not the copy, dominates. Measured with
// BenchmarkApply/pageSize=4096/consecutive (1 MiB frames, 2-CPU AMD EPYC VM,
// ext4, noisy: medians of 3): one pwrite per page 1.6 GB/s, runs copied
// into a 64 KiB buffer 4.0 GB/s, 256 KiB 4.6 GB/s, 1 MiB no better; hence
// runBufferSize. What remains is mostly hashing (xxhash, ~57% of CPU).
//
// Pages decoded from a batch usually need no copy at all: the frames
// decoder hands out slices of the message, and the writer puts the pages of
// one message one after the other, so a run of consecutive pages is often
// already one contiguous range of memory. contiguous finds out, and such a
// run goes out straight from the message.

// consecutiveRun returns how many pages from the start of pages have
// consecutive numbers (at least 1 when pages is not empty).
func consecutiveRun(pages []frames.Page) int {
	n := min(len(pages), 1)
	for n < len(pages) && pages[n].Number == pages[n-1].Number+1 {
		n++
	}
	return n
}

// contiguous returns the run's data as one slice when the pages lie one
// after the other in the same array, or nil.
func contiguous(run []frames.Page) []byte {
	first := run[0].Data
	ps := len(first)
	total := ps * len(run)
	if ps == 0 || cap(first) < total {
		return nil
	}
	all := first[:total]
	for i := 1; i < len(run); i++ {
		if &all[i*ps] != &run[i].Data[0] {
			return nil
		}
	}
	return all
}

// writeRun writes a run of consecutive pages at off: straight from memory
// when it is one piece, else copied into buf in pieces of len(buf).
func writeRun(f *os.File, run []frames.Page, off int64, buf []byte) error {
	if len(run) == 1 {
		_, err := f.WriteAt(run[0].Data, off)
		return err
	}
	if all := contiguous(run); all != nil {
		_, err := f.WriteAt(all, off)
		return err
	}
	ps := len(run[0].Data)
	per := max(1, len(buf)/ps)
	for len(run) > 0 {
		k := min(per, len(run))
		if k == 1 {
			if _, err := f.WriteAt(run[0].Data, off); err != nil {
				return err
			}
		} else {
			n := 0
			for _, p := range run[:k] {
				n += copy(buf[n:], p.Data)
			}
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return err
			}
		}
		run = run[k:]
		off += int64(k * ps)
	}
	return nil
}
