package lanes

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/framectl/framectl/frames"
)

// laneFile is one lane of a Set: its tracked state and the file that holds
// its bytes. The file is always Pages() * PageSize() bytes long, page n at
// offset (n-1) * PageSize().
type laneFile struct {
	num  uint32
	kind frames.LaneKind
	path string
	f    *os.File
	t    Tracker
	lazy *lazyLane // chunks not loaded yet (lazy.go); nil for a lane loaded whole
}

// laneFileName is the name of a lane's file in a Set's directory.
func laneFileName(num uint32) string { return fmt.Sprintf("lane-%d.db", num) }

// createLaneFile creates an empty lane. The file must not exist: a Set
// never adopts bytes it did not write.
func createLaneFile(dir string, num uint32, kind frames.LaneKind) (*laneFile, error) {
	path := filepath.Join(dir, laneFileName(num))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &laneFile{num: num, kind: kind, path: path, f: f}, nil
}

func (l *laneFile) info() Lane {
	return Lane{Number: l.num, Kind: l.kind, PageSize: l.t.pageSize, Pages: l.t.Pages(), Checksum: l.t.sum, Path: l.path}
}

// writePages writes pages (strictly ascending, each PageSize bytes, checked
// by the caller) to the file and the tracker. Runs of consecutive pages go
// out in one pwrite (see writeRun).
func (l *laneFile) writePages(pages []frames.Page, buf []byte) error {
	ps := int64(l.t.pageSize)
	for i := 0; i < len(pages); {
		run := consecutiveRun(pages[i:])
		first := pages[i].Number
		if err := writeRun(l.f, pages[i:i+run], int64(first-1)*ps, buf); err != nil {
			return fmt.Errorf("write %s: %w", l.path, err)
		}
		for _, p := range pages[i : i+run] {
			if err := l.t.Write(p.Number, p.Data); err != nil {
				return err
			}
		}
		i += run
	}
	return nil
}

// resize sets the lane's size in pages, in the tracker and the file.
func (l *laneFile) resize(pages uint32) error {
	if pages == l.t.Pages() {
		return nil
	}
	if err := l.t.Resize(pages); err != nil {
		return err
	}
	if l.lazy != nil && pages < l.lazy.basePages {
		l.lazy.cut(pages)
	}
	if err := l.f.Truncate(int64(pages) * int64(l.t.pageSize)); err != nil {
		return fmt.Errorf("truncate %s: %w", l.path, err)
	}
	return nil
}

// remove closes and deletes the file.
func (l *laneFile) remove() error {
	cerr := l.f.Close()
	if err := os.Remove(l.path); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("close %s: %w", l.path, cerr)
	}
	return nil
}
