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
//	go test ./fuzz -timeout 0 -run '^$' -fuzz '^FuzzBatch$' -fuzztime 1000000x
//
// (-timeout 0: go test's default 10-minute timeout also ends fuzzing, with
// a panic that looks like a failure; the *Content targets run about 400 to
// 5,000 executions a second here, the others 4,000 to 20,000).
// A crashing input is written to testdata/fuzz/<Target>/ and then replayed
// by every plain `go test` run: commit it with the fix.
//
// This package holds tests only; it must never be imported.
package fuzz
