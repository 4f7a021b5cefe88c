package iocount_test

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/framectl/framectl/internal/iocount"
)

func TestReaderCountsWhatPassesAndKeepsTheError(t *testing.T) {
	cr := iocount.NewReader(iotest.TimeoutReader(strings.NewReader("abcdef")), nil)
	p := make([]byte, 4)
	n, err := cr.Read(p)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	_, err = cr.Read(p)
	require.ErrorIs(t, err, iotest.ErrTimeout, "the error passes unchanged")
	require.Equal(t, int64(4), cr.Count())
}

func TestReadersShareACounter(t *testing.T) {
	var total atomic.Int64
	a := iocount.NewReader(strings.NewReader("abc"), &total)
	b := iocount.NewReader(strings.NewReader("defgh"), &total)
	for _, r := range []io.Reader{a, b} {
		_, err := io.Copy(io.Discard, r)
		require.NoError(t, err)
	}
	require.Equal(t, int64(8), total.Load())
	require.Equal(t, int64(8), a.Count(), "Count is the shared total")
}
