package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/framectl/framectl/bucket"
	"github.com/framectl/framectl/frames"
)

// cmdFlags is one command's flag set with what every command shares: its
// usage (synopsis, help text, the hint printed with usage errors) and
// where output goes.
//
// Flags are parsed with ContinueOnError and the flag package's own messages
// are discarded: help goes to stdout (it was asked for), usage errors to
// stderr as one line followed by a hint of what to type.
type cmdFlags struct {
	fs   *flag.FlagSet
	name string
	usage
	stdout io.Writer
	stderr io.Writer
	out    *outputFlags // nil: the command prints no JSON
	// emitted: the command's JSON document is printed (jsonerror.go).
	emitted bool
}

// usage is what a command's help says besides its flags' usage strings.
type usage struct {
	// forms are the ways to call the command, with flag names only: the
	// synopsis is rendered from them and the flag set (synopsis.go).
	forms []string
	help  string // description and examples
	hint  string // one example command line
}

func newFlags(name string, u usage, stdout, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet("framectl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &cmdFlags{fs: fs, name: name, usage: u, stdout: stdout, stderr: stderr}
}

// parse parses args, allowing flags after positional arguments
// ("inspect KEY --json"); "--" ends the flags. It returns the positional
// arguments, or ok false with the exit code to return (0 after -h).
func (c *cmdFlags) parse(args []string) (positional []string, code int, ok bool) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printHelp(c.stdout)
				return nil, exitOK, false
			}
			if c.out != nil && jsonAsked(args) {
				c.out.json = true // not parsed yet: it comes after the flag that failed
			}
			return nil, c.usageError("%v", err), false
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return positional, 0, true
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), 0, true
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseFlags parses args for a command that takes no positional
// arguments; ok false carries the exit code to return.
func (c *cmdFlags) parseFlags(args []string) (code int, ok bool) {
	pos, code, ok := c.parse(args)
	if ok && len(pos) > 0 {
		return c.usageError("unexpected argument %q", pos[0]), false
	}
	return code, ok
}

// printHelp prints the command's synopsis, its help and its flags.
func (c *cmdFlags) printHelp(w io.Writer) {
	for i, l := range c.synopsis() {
		lead := "Usage: "
		if i > 0 {
			lead = strings.Repeat(" ", len(lead))
		}
		fmt.Fprintln(w, lead+l)
	}
	fmt.Fprintln(w, "\n"+strings.TrimSpace(c.help))
	fmt.Fprintln(w, "\nFlags:")
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
}

// usageError reports a usage error and returns exitUsage.
func (c *cmdFlags) usageError(format string, args ...any) int {
	msg := oneLine(fmt.Sprintf(format, args...))
	fmt.Fprintf(c.stderr, "framectl %s: %s\n", c.name, msg)
	fmt.Fprintf(c.stderr, "  try: %s\n  (framectl %s -h for help)\n", c.hint, c.name)
	c.emitFailure(exitUsage, errors.New(msg))
	return exitUsage
}

// fail reports err on one line and returns the exit code it maps to.
func (c *cmdFlags) fail(err error) int {
	code := exitCode(err)
	what := ""
	if code == exitSignal {
		what = "interrupted: "
	}
	fmt.Fprintf(c.stderr, "framectl %s: %s%s\n", c.name, what, oneLine(err.Error()))
	c.emitFailure(code, err)
	return code
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// outputFlags are --json and -v.
type outputFlags struct {
	json    bool
	verbose bool
}

func (c *cmdFlags) outputFlags() *outputFlags {
	o := &outputFlags{}
	c.fs.BoolVar(&o.json, "json", false, "print one JSON document on stdout instead of text, with an \"error\" member when the exit code is not 0")
	c.fs.BoolVar(&o.verbose, "v", false, "verbose: progress on stderr even with --json")
	c.out = o
	return o
}

// progress reports whether to show progress on stderr: always for text
// output, only with -v for JSON (stdout is then for the JSON document).
func (o *outputFlags) progress() bool { return !o.json || o.verbose }

// bucketFlag adds --bucket.
func (c *cmdFlags) bucketFlag() *string {
	return c.fs.String("bucket", "", "bucket `URL`: s3://BUCKET/PREFIX?endpoint=HOST:PORT or file:///DIR")
}

// openBucket opens the bucket named by --bucket for a command that only
// reads it. It creates nothing: a mistyped file:// URL is "no such bucket"
// (exit 4), not a new empty bucket reported clean. A missing or malformed
// URL is a usage error (ok false, code exitUsage); no request is made, so
// an unreachable bucket shows on first use.
func (c *cmdFlags) openBucket(ctx context.Context, url string) (bucket.Bucket, int, bool) {
	return c.open(ctx, url, bucket.OpenExisting)
}

// createBucket opens the bucket named by --bucket for a command that
// writes it (demo, compact): a file:// directory is created if missing.
func (c *cmdFlags) createBucket(ctx context.Context, url string) (bucket.Bucket, int, bool) {
	return c.open(ctx, url, bucket.Open)
}

func (c *cmdFlags) open(ctx context.Context, url string, open func(context.Context, string) (bucket.Bucket, error)) (bucket.Bucket, int, bool) {
	if url == "" {
		return nil, c.usageError("--bucket is required (%s)", oneLine(bucket.URLSyntax)), false
	}
	b, err := open(ctx, url)
	switch {
	case errors.Is(err, bucket.ErrBadURL):
		return nil, c.usageError("%v", err), false
	case errors.Is(err, bucket.ErrNoBucket):
		return nil, c.fail(fmt.Errorf("%w; %s only reads and never creates a bucket: check --bucket %s", err, c.name, url)), false
	case err != nil:
		return nil, c.fail(err), false
	}
	return b, 0, true
}

// namespaceFlags are --namespace, --tenant and --namespace-id.
type namespaceFlags struct {
	namespace, tenant, id string
	tenantSet             bool
}

func (c *cmdFlags) namespaceFlags() *namespaceFlags {
	n := &namespaceFlags{}
	c.fs.StringVar(&n.namespace, "namespace", "", "the namespace's unique key `NS` (hashed with --tenant into the path element)")
	c.fs.Func("tenant", "the namespace's `TENANT` (default empty)", func(s string) error {
		n.tenant, n.tenantSet = s, true
		return nil
	})
	c.fs.StringVar(&n.id, "namespace-id", "", "the namespace path element `ID` itself: 22 characters, as ls prints it")
	return n
}

// resolve returns the namespace path element, or "" when no namespace was
// given. The error is a usage error.
func (n *namespaceFlags) resolve() (string, error) {
	switch {
	case n.id != "" && (n.namespace != "" || n.tenantSet):
		return "", errors.New("--namespace-id names the namespace itself: give it or --namespace/--tenant, not both")
	case n.id != "":
		if !(frames.Actor{Namespace: n.id, Actor: "00"}).Valid() {
			return "", fmt.Errorf("--namespace-id %q is not a namespace ID (22 characters of base64url, as ls prints)", n.id)
		}
		return n.id, nil
	case n.namespace != "":
		return frames.NamespaceID(n.tenant, n.namespace), nil
	case n.tenantSet:
		return "", errors.New("--tenant needs --namespace")
	}
	return "", nil
}

// parseActor checks an --actor value: the hex of the actor ID (case
// insensitive; the key uses lowercase).
func parseActor(namespace, s string) (frames.Actor, error) {
	a := frames.Actor{Namespace: namespace, Actor: strings.ToLower(s)}
	if !(frames.Actor{Namespace: frames.NamespaceID("", ""), Actor: a.Actor}).Valid() {
		return a, fmt.Errorf("--actor %q is not an actor key: the hex of 1 to %d bytes", s, frames.MaxActorIDBytes)
	}
	return a, nil
}

// scope is what a command acts on: everything, a namespace, or an actor.
type scope struct {
	namespace string       // "" = the whole bucket
	actor     frames.Actor // Actor "" = the whole namespace
}

func (s scope) prefix() string {
	switch {
	case s.actor.Actor != "":
		return s.actor.Prefix()
	case s.namespace != "":
		return "do/" + s.namespace + "/"
	}
	return "do/"
}

// parseScope parses args for a command that takes no positional
// arguments and turns --namespace* and --actor into its scope; ok false
// carries the exit code to return.
func (c *cmdFlags) parseScope(args []string, n *namespaceFlags, actor *string) (sc scope, code int, ok bool) {
	if code, ok := c.parseFlags(args); !ok {
		return scope{}, code, false
	}
	sc, err := resolveScope(n, *actor)
	if err != nil {
		return scope{}, c.usageError("%v", err), false
	}
	return sc, 0, true
}

// notFound is the errNotFound of a scope b holds nothing of, naming the
// actor or the namespace and the prefix listed.
func (s scope) notFound(b bucket.Bucket) error {
	if s.actor.Actor != "" {
		return fmt.Errorf("actor %s: %w: no objects under %s in %s", s.actor.Actor, errNotFound, s.prefix(), b)
	}
	return fmt.Errorf("namespace %s: %w: no actors under %s in %s", s.namespace, errNotFound, s.prefix(), b)
}

// resolveScope turns --namespace* and --actor into a scope. An actor needs
// a namespace.
func resolveScope(n *namespaceFlags, actor string) (scope, error) {
	ns, err := n.resolve()
	if err != nil {
		return scope{}, err
	}
	s := scope{namespace: ns}
	if actor != "" {
		if ns == "" {
			return scope{}, errors.New("--actor needs --namespace (or --namespace-id)")
		}
		if s.actor, err = parseActor(ns, actor); err != nil {
			return scope{}, err
		}
	}
	return s, nil
}
