// Package fuzz holds native Go fuzz targets over every decoder of bucket
// bytes: batch files, snapshot files, object keys and key numbers, and the
// JSON records of package fence (own.json, node leases). Each target checks
// the decoder's promises on arbitrary input: no panic, no hang, allocation
// bounded by the configured limits, an error that names the object and
// matches a sentinel, and, when the input is accepted, that it re-encodes
// to something that decodes the same.
//
// CI runs each target for a fixed number of executions (see test.sh; counts,
// not durations, because of a Go 1.26 fuzzing race at the deadline); run one
// longer by hand with
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzBatch$' -fuzztime 5000000x
//
// A crashing input is written to testdata/fuzz/<Target>/ and then replayed
// by every plain `go test` run: commit it with the fix.
//
// This package holds tests only; it must never be imported.
package fuzz
