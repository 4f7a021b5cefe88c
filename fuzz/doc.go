// Package fuzz holds native Go fuzz targets over every decoder of bucket
// bytes: batch files, snapshot files and manifests (FuzzReadManifest reads
// both through OpenSnapshot), chunk files, object keys and key numbers,
// the JSON records of package fence (own.json, node leases), and the
// messages of the follower protocol (package follow: FuzzFollowMessage;
// FuzzFollower and FuzzFollowerOps, which feed a follower any sequence of
// them, and mostly well-formed ones), and what a peer sends over package
// peer's connections (FuzzPeerHandshake, before it is authenticated;
// FuzzPeerFrames, after; FuzzPeerPayload, an authenticated frame's actor
// and message, sealed with the connection's key), and the files of a
// follower's store (package tails: FuzzTailsFile, which opens a store over
// any bytes, its CRCs fixed up or not). Each target checks the decoder's
// promises on arbitrary input: no panic, no hang, allocation bounded by
// the configured limits, an error that names the object and matches a
// sentinel, and, when the input is accepted, that it re-encodes to
// something that decodes the same.
//
// FuzzRestore fuzzes restore itself: it damages a small bucket written by
// the real write path (bytes flipped, objects cut, dropped, copied under
// other keys, swapped, garbage added, content changed under a valid seal)
// and checks that package restore never returns a database other than a
// clean state of the actor's history while reporting success, and that
// verification names the damage (restore_test.go lists every property).
//
// CI runs each target for a fixed number of executions (see test.sh; counts,
// not durations, because of a Go 1.26 fuzzing race at the deadline); run one
// longer by hand with
//
//	go test ./fuzz -timeout 0 -run '^$' -fuzz '^FuzzBatch$' -fuzztime 1000000x
//
// or, for restore,
//
//	go test ./fuzz -timeout 0 -run '^$' -fuzz '^FuzzRestore$' -fuzztime 1000000x
//
// (-timeout 0: go test's default 10-minute timeout also ends fuzzing, with
// a panic that looks like a failure; the *Content targets run about 400 to
// 5,000 executions a second here, the Peer targets (a handshake each) 1,500
// to 3,500, FuzzTailsFile (a store opened up to three times, on a tmpfs at
// /dev/shm when there is one) 1,000 to 4,000 and its 30,000 in test.sh about
// 45 s with an empty corpus cache, the others 4,000 to 20,000, but
// FuzzRestore, which restores and verifies a whole bucket each time, 200 to
// 500: its 30,000 executions in test.sh take a minute or more).
// A crashing input is written to testdata/fuzz/<Target>/ and then replayed
// by every plain `go test` run: commit it with the fix.
//
// This package holds tests only; it must never be imported.
package fuzz
