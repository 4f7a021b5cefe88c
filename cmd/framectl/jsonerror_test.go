package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framectl/framectl/bucket/buckettest"
	"github.com/stretchr/testify/require"
)

// document parses stdout as exactly one JSON document and returns its
// members and its "error" member (nil when it has none).
func document(t *testing.T, what string, r result) (map[string]json.RawMessage, *jsonError) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var doc map[string]json.RawMessage
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: stdout is not a JSON document: %v\nstdout:\n%s\nstderr:\n%s", what, err, r.stdout, r.stderr)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("%s: stdout holds more than one JSON document (%v):\n%s", what, err, r.stdout)
	}
	raw, ok := doc["error"]
	if !ok {
		return doc, nil
	}
	var e jsonError
	require.NoError(t, json.Unmarshal(raw, &e), "%s: error member %s", what, raw)
	return doc, &e
}

// TestJSONFailures: with --json every command prints exactly one JSON
// document whatever the outcome, with an "error" member naming the exit
// code, its kind and the message, beside the command's report when it has
// one; the exit codes are those of the text output.
func TestJSONFailures(t *testing.T) {
	f := replicate(t, buckettest.Dir(t), 4)
	bad := replicate(t, buckettest.Dir(t), 4)
	damaged := bad.batches(t)[1]
	damage(t, bad.b, damaged, -6)
	missing := f.actor.LogKey(1, 99)
	out := filepath.Join(t.TempDir(), "out.db")
	actor := func(f *fixture, args ...string) []string { return append(args, f.actorFlags()...) }
	ns := []string{"--namespace", testNamespace}

	cases := []struct {
		name   string
		args   []string
		code   int
		report string // a member of the command's report beside the error; "" for none
		says   string // in the message
	}{
		// Usage errors, found after the flags parsed and while parsing them.
		{"verify usage", []string{"verify", "--bucket", f.url, "--parallel", "-1", "--json"}, exitUsage, "", "--parallel -1"},
		{"verify bad flag", []string{"verify", "--bucket", f.url, "--parallel", "x", "--json"}, exitUsage, "", "invalid value"},
		{"restore usage", []string{"restore", "--bucket", f.url, "--json", "--namespace", "n"}, exitUsage, "", "which actor?"},
		{"restore nearest alone", actor(f, "restore", "--out", out, "--nearest", "--json"), exitUsage, "", "--nearest"},

		{"ls usage", []string{"ls", "--json"}, exitUsage, "", "--bucket is required"},
		{"ls bad flag", []string{"ls", "--nothing", "--json=true"}, exitUsage, "", "-nothing"},
		{"inspect usage", []string{"inspect", "--json"}, exitUsage, "", "give an object KEY"},
		{"compact usage", []string{"compact", "--bucket", f.url, "--json"}, exitUsage, "", "--namespace"},
		{"demo usage", []string{"demo", "--commits", "1", "--json"}, exitUsage, "", "--commits 1"},

		// Not found.
		{"verify not found", []string{"verify", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef", "--json"}, exitNotFound, "", "0badbeef"},
		{"verify namespace not found", []string{"verify", "--bucket", f.url, "--namespace", "nothing-here", "--json"}, exitNotFound, "", "no actors"},
		{"restore not found", []string{"restore", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef", "--out", out, "--json"}, exitNotFound, "", "0badbeef"},
		{"restore --all not found", []string{"restore", "--bucket", f.url, "--namespace", "nothing-here", "--all", "--out", t.TempDir(), "--json"}, exitNotFound, "restored", "no actors"},
		{"restore out of range", actor(f, "restore", "--out", out, "--to-seq", "99", "--json"), exitNotFound, "", "seq 99 is past the newest state"},
		{"ls not found", []string{"ls", "--bucket", f.url, "--namespace", testNamespace, "--actor", "0badbeef", "--json"}, exitNotFound, "", "0badbeef"},
		{"inspect not found", []string{"inspect", "--bucket", f.url, missing, "--json"}, exitNotFound, "", missing},
		{"compact not found", []string{"compact", "--bucket", f.url, "--namespace", "nothing-here", "--json"}, exitNotFound, "", "no actors"},

		// Damage.
		{"verify damage", actor(bad, "verify", "--json"), exitDamage, "actors", "damage found: 1 problems"},
		{"restore damage", actor(bad, "restore", "--out", out, "--json"), exitDamage, "", damaged},
		{"restore --all damage", append([]string{"restore", "--bucket", bad.url, "--all", "--out", t.TempDir(), "--json"}, ns...), exitDamage, "failed", damaged},
		{"inspect damage", []string{"inspect", "--bucket", bad.url, damaged, "--json"}, exitDamage, "batch", damaged},
		{"compact damage", actor(bad, "compact", "--force", "--json"), exitDamage, "actors", damaged},

		// The bucket cannot be reached.
		{"verify unreachable", []string{"verify", "--bucket", unreachable, "--json"}, exitIO, "", "127.0.0.1:1"},
		{"restore unreachable", []string{"restore", "--bucket", unreachable, "--namespace", "n", "--actor", "00", "--out", out, "--json"}, exitIO, "", "127.0.0.1:1"},
		{"ls unreachable", []string{"ls", "--bucket", unreachable, "--json"}, exitIO, "", "127.0.0.1:1"},
		{"inspect unreachable", []string{"inspect", "--bucket", unreachable, testActor.LogKey(1, 1), "--json"}, exitIO, "", "127.0.0.1:1"},
		{"compact unreachable", []string{"compact", "--bucket", unreachable, "--namespace", "n", "--json"}, exitIO, "actors", "127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.code == exitIO {
				t.Parallel() // the S3 client retries for seconds before it gives up
			}
			r := runCLI(t, c.args...).want(t, c.code)
			doc, e := document(t, strings.Join(c.args, " "), r)
			if e == nil || e.Code != c.code || e.Kind != errorKinds[c.code] || !strings.Contains(e.Message, c.says) {
				t.Fatalf("error member %+v, want code %d kind %q saying %q\n%s", e, c.code, errorKinds[c.code], c.says, r.stdout)
			}
			_, hasReport := doc[c.report]
			switch {
			case c.report == "" && (len(doc) != 2 || string(doc["command"]) != `"`+c.args[0]+`"`):
				t.Fatalf("want only the command and the error, got %s", r.stdout)
			case c.report != "" && !hasReport:
				t.Fatalf("the report (%q) is missing beside the error: %s", c.report, r.stdout)
			}
			if r.stderr == "" {
				t.Errorf("nothing on stderr: the error goes there too")
			}
			if c.code == exitIO {
				return // the Test*Unreachable tests run the text commands
			}
			// Text output keeps stdout free of JSON and the same exit code.
			var text []string
			for _, a := range c.args {
				if !strings.HasPrefix(a, "--json") {
					text = append(text, a)
				}
			}
			if tr := runCLI(t, text...).want(t, c.code); strings.HasPrefix(strings.TrimSpace(tr.stdout), "{") {
				t.Errorf("text output printed JSON: %s", tr.stdout)
			}
		})
	}

	// An out-of-range target names the range in the error.
	r := runCLI(t, actor(f, "restore", "--out", out, "--to-seq", "99", "--json")...).want(t, exitNotFound)
	if _, e := document(t, "restore --to-seq 99", r); e.Target == nil || e.Target.FirstSeq != 0 || e.Target.LastSeq != 4 ||
		e.Target.Epoch != 1 || e.Target.Requested != "seq 99" {
		t.Errorf("out of range: target %+v", e.Target)
	}

	// Interrupted.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r = framectlCtx(ctx, actor(f, "verify", "--json")...)
	if _, e := document(t, "interrupted verify", r); r.code != exitSignal || e == nil || e.Code != exitSignal || e.Kind != "interrupted" {
		t.Errorf("interrupted: exit %d, error %+v", r.code, e)
	}

	// Success: the report, and no error member.
	for _, args := range [][]string{actor(f, "verify", "--json"), actor(f, "ls", "--json"), actor(f, "restore", "--out", out, "--json")} {
		if _, e := document(t, strings.Join(args, " "), runCLI(t, args...).want(t, exitOK)); e != nil {
			t.Errorf("%s: error member on success: %+v", strings.Join(args, " "), e)
		}
	}
}
