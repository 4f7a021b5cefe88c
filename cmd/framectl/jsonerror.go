package main

import (
	"strconv"
	"strings"
)

// With --json a command prints exactly one JSON document on stdout, whatever
// the outcome, so that a script can always parse it. When the exit code is
// not 0 the document has an "error" member saying why: the command's own
// report with it when there is one (verify that found damage, restore --all
// with failed actors, a damaged object inspected), else only
//
//	{"command": "restore", "error": {"code": 4, "kind": "not-found", "message": "..."}}
//
// The code is the exit code; the kind names it (see errorKinds).

// jsonError is the "error" member of a JSON document.
type jsonError struct {
	Code    int    `json:"code"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Target is set when a restore target was out of range: what the
	// session holds.
	Target *targetRange `json:"target,omitempty"`
}

// failureDoc is the document of a command that failed before it had a
// report to print.
type failureDoc struct {
	Command string     `json:"command"`
	Error   *jsonError `json:"error"`
}

// errorKinds name the exit codes in JSON documents (exitcodes.go says
// what each means).
var errorKinds = map[int]string{
	exitDamage:   "damage",
	exitUsage:    "usage",
	exitIO:       "io",
	exitNotFound: "not-found",
	exitSignal:   "interrupted",
}

// newJSONError describes an exit code and what caused it.
func newJSONError(code int, err error) *jsonError {
	e := &jsonError{Code: code, Kind: errorKinds[code], Message: errString(err)}
	e.Target = targetRangeOf(err)
	return e
}

// emit prints v as the command's JSON document.
func (c *cmdFlags) emit(v any) error {
	c.emitted = true
	return writeJSON(c.stdout, v)
}

// emitFailure prints the document of a failed command, unless it printed
// its document already.
func (c *cmdFlags) emitFailure(code int, err error) {
	if c.out == nil || !c.out.json || c.emitted {
		return
	}
	c.emit(failureDoc{Command: c.name, Error: newJSONError(code, err)}) // stdout gone: the exit code still tells
}

// jsonAsked reports whether a command line that did not parse asked for
// --json (a flag parsed after the one that failed): the script that typed
// it parses stdout.
func jsonAsked(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name != "json" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasValue {
			return true
		}
		b, err := strconv.ParseBool(value)
		return err == nil && b
	}
	return false
}
