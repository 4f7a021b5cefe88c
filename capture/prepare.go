package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"

	"github.com/ncruces/go-sqlite3"
)

// Prepare puts the database file at path in the state Attach requires: WAL
// mode, the WAL checkpointed into the database file and truncated. A file
// that does not exist is created empty, with pageSize (an existing
// database keeps its own). It uses the plain "os" VFS: nothing done here is
// a commit to capture (a session's first snapshot covers it). Opening the
// file with SQLite also recovers a WAL left by a process that died, so the
// file then holds every commit that WAL held.
func Prepare(ctx context.Context, path string, pageSize int) error {
	c, err := sqlite3.Open(fileURI(path, "os"))
	if err != nil {
		return fmt.Errorf("capture: opening %s: %w", path, err)
	}
	defer c.Close()
	c.SetInterrupt(ctx)
	for _, sql := range []string{
		fmt.Sprintf("PRAGMA page_size=%d", pageSize), // ignored by an existing database
		"PRAGMA journal_mode=WAL",
		"PRAGMA wal_checkpoint(TRUNCATE)",
	} {
		if err := c.Exec(sql); err != nil {
			return fmt.Errorf("capture: %s: %s: %w", path, sql, err)
		}
	}
	s, _, err := c.Prepare("PRAGMA journal_mode")
	if err != nil {
		return fmt.Errorf("capture: %s: %w", path, err)
	}
	defer s.Close()
	if !s.Step() || s.ColumnText(0) != "wal" {
		return fmt.Errorf("capture: %s: cannot switch to WAL mode", path)
	}
	return nil
}

// PageSize reads the page size of the database file at path from its
// header: the big-endian 16-bit value at offset 16, where 1 means 65536
// (https://sqlite.org/fileformat.html#page_size).
func PageSize(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("capture: %w", err)
	}
	defer f.Close()
	var hdr [18]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("capture: %s: reading the database header: %w", path, err)
	}
	return headerPageSize(hdr[:]), nil
}

func headerPageSize(hdr []byte) uint32 {
	ps := uint32(binary.BigEndian.Uint16(hdr[16:18]))
	if ps == 1 {
		ps = 65536
	}
	return ps
}

// checkPrepared checks Attach's precondition on the files. It reads the
// files directly: the capture only ever wraps a file-backed base VFS. With
// a page source whose local file lacks page 1, the header comes from the
// source.
func checkPrepared(path string, opts Options) error {
	notPrepared := func(msg string, err error) error {
		return &captureError{Path: path, Kind: errNotPrepared, Msg: msg, Err: err}
	}
	f, err := os.Open(path)
	if err != nil {
		return notPrepared("create it in WAL mode before attaching", err)
	}
	defer f.Close()
	hdr := make([]byte, 100)
	if src := opts.Pages; src != nil && !src.Local(1) {
		page := make([]byte, opts.PageSize)
		if err := fetchPage(src, 1, page, opts.PageTimeout); err != nil {
			return notPrepared("reading page 1 from the page source", err)
		}
		copy(hdr, page)
	} else if _, err := io.ReadFull(f, hdr); err != nil {
		return notPrepared("not a SQLite database (short header)", err)
	}
	if !bytes.HasPrefix(hdr, []byte("SQLite format 3\x00")) {
		return notPrepared("not a SQLite database", nil)
	}
	if opts.Pages != nil && headerPageSize(hdr) != opts.PageSize {
		return notPrepared(fmt.Sprintf("page size %d, but Options.PageSize is %d", headerPageSize(hdr), opts.PageSize), nil)
	}
	// File format read/write versions 2 mean WAL mode
	// (https://sqlite.org/fileformat2.html#database_header).
	if hdr[18] != 2 || hdr[19] != 2 {
		return notPrepared("not in WAL mode: set journal_mode=WAL with a plain connection first (Prepare)", nil)
	}
	// go-sqlite3 treats 8 reserved bytes per page as its page checksums
	// (vfs/cksm.go). It computes them only when pages are written to the
	// database file, never into WAL frames, so captured pages would carry
	// stale checksums and a restored copy would fail verification.
	if hdr[20] == 8 {
		return notPrepared("uses go-sqlite3 page checksums (8 reserved bytes), which WAL frames do not carry", nil)
	}
	fi, err := os.Stat(path + "-wal")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return notPrepared("checking the WAL", err)
	case fi.Size() > 0:
		return notPrepared(fmt.Sprintf("WAL holds %d bytes the capture did not see written: run PRAGMA wal_checkpoint(TRUNCATE) and close every connection before attaching (Prepare)", fi.Size()), nil)
	}
	return nil
}

func fileURI(path, vfsName string) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: "vfs=" + vfsName}
	return u.String()
}
