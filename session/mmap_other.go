//go:build !unix

package session

import (
	"errors"
	"os"

	"github.com/framectl/framectl/frames"
)

// capturedWord: no shared mappings here; recordCaptured pwrites instead.
type capturedWord struct{}

func mapCaptured(*os.File) (*capturedWord, error) {
	return nil, errors.New("no shared file mappings on this system")
}

func (*capturedWord) store(frames.Seq) {}
func (*capturedWord) unmap()           {}
