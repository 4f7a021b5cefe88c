// Package capnp holds frames.capnp, the Cap'n Proto schema of framectl's
// bucket objects, and the Go code generated from it. The generated code is
// committed, and `go generate ./capnp/...` reproduces it byte for byte from
// Debian's capnp compiler (package capnproto, 0.9.2) and the capnpc-go plugin
// pinned as a tool in go.mod (capnproto.org/go/capnp/v3 v3.1.0-alpha.2).
//
// Import it as wire: its types are read and written only by package frames,
// which adds the framing, bounds and validation that raw accessors lack (a
// wrong union accessor panics; a header can claim any size). Nothing else may
// decode these messages directly.
package capnp

//go:generate sh -c "capnp compile -I\"$(go list -m -f '{{.Dir}}' capnproto.org/go/capnp/v3)/std\" -o\"$(go tool -n capnpc-go)\" frames.capnp"
