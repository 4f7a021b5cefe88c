package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// scratchPrefix names the directories a replay builds a database in, beside
// the destination (Restore renames the result out of one when it verified).
const scratchPrefix = ".framectl-replay-"

// RemoveScratch deletes the scratch directories that replays left in dir
// when their process died mid-restore, and returns how many bytes they
// held. Call it only where no restore is running: a directory this process
// (or another) is replaying into would be pulled from under it. framectl.Open
// does, for the directory it owns.
func RemoveScratch(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	var freed int64
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scratchPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					freed += fi.Size()
				}
			}
			return nil
		})
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, fmt.Errorf("restore: removing scratch %s: %w", path, err))
		}
	}
	return freed, errors.Join(errs...)
}
