package fsync

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	if err := Dir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	err := Dir(missing)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Dir(%s) = %v, want fs.ErrNotExist", missing, err)
	}
}
