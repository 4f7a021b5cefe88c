// Package vfs is where framectl's entry point used to live, before it was
// split into package capture (the SQLite VFS adapter), package session (the
// replication session) and package framectl (Open and DB, the wiring).
//
// Deprecated: every name here is an alias of its new home, kept for one
// release; the README's "Migrating from package vfs" lists them. Import
// github.com/framectl/framectl (framectl.Open, framectl.DB,
// framectl.Refusal) and github.com/framectl/framectl/session (Config,
// Stats, Observer, Peers, the modes and errors) instead.
package vfs

import (
	"context"

	"github.com/framectl/framectl"
	"github.com/framectl/framectl/capture"
	"github.com/framectl/framectl/session"
)

// VFSName is the name the capture VFS is registered under.
//
// Deprecated: use capture.Name.
const VFSName = capture.Name

// DB is a replicated database.
//
// Deprecated: use framectl.DB.
type DB = framectl.DB

// Open opens a replicated database.
//
// Deprecated: use framectl.Open.
func Open(ctx context.Context, cfg Config) (*DB, error) { return framectl.Open(ctx, cfg) }

// Refusal tells why replication refused a write.
//
// Deprecated: use framectl.Refusal.
func Refusal(err error) error { return framectl.Refusal(err) }

// Deprecated: use the session package's names.
type (
	Config         = session.Config
	Mode           = session.Mode
	Unacknowledged = session.Unacknowledged
	Stats          = session.Stats
	Start          = session.Start
	StartFrom      = session.StartFrom
	Observer       = session.Observer
	Peers          = session.Peers
)

// Deprecated: use the session package's names.
const (
	Async                 = session.Async
	Sync                  = session.Sync
	UnacknowledgedDefault = session.UnacknowledgedDefault
	KeepUnacknowledged    = session.KeepUnacknowledged
	DiscardUnacknowledged = session.DiscardUnacknowledged
	StartNew              = session.StartNew
	StartReused           = session.StartReused
	StartKept             = session.StartKept
	StartRestored         = session.StartRestored

	DefaultPageSize            = session.DefaultPageSize
	DefaultMaxBatchBytes       = session.DefaultMaxBatchBytes
	DefaultMaxPendingBytes     = session.DefaultMaxPendingBytes
	DefaultBackpressureTimeout = session.DefaultBackpressureTimeout
	DefaultSyncTimeout         = session.DefaultSyncTimeout
	DefaultRetryMin            = session.DefaultRetryMin
	DefaultRetryMax            = session.DefaultRetryMax
	DefaultDirUploadInterval   = session.DefaultDirUploadInterval
	DefaultS3UploadInterval    = session.DefaultS3UploadInterval
	DefaultListingWait         = session.DefaultListingWait
	DefaultPeerUploadInterval  = session.DefaultPeerUploadInterval
	DefaultPeerWait            = session.DefaultPeerWait
	DefaultKeptBytes           = session.DefaultKeptBytes
)

// Deprecated: use the session package's errors; they are the same values,
// so errors.Is matches either name.
var (
	ErrFenced        = session.ErrFenced
	ErrClosed        = session.ErrClosed
	ErrBackpressure  = session.ErrBackpressure
	ErrStopped       = session.ErrStopped
	ErrSyncTimeout   = session.ErrSyncTimeout
	ErrListingBehind = session.ErrListingBehind
)
