//go:build !unix

package vfs

import (
	"errors"
	"os"
)

// capturedWord: no shared mappings here; recordCaptured pwrites instead.
type capturedWord struct{}

func mapCaptured(*os.File) (*capturedWord, error) {
	return nil, errors.New("no shared file mappings on this system")
}

func (*capturedWord) store(uint64) {}
func (*capturedWord) unmap()       {}
