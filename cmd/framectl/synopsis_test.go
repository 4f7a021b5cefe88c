package main

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the synopsis and exit codes of ../../README.md and doc.go from what framectl prints")

// The README's synopsis block sits between these lines.
const (
	readmePath  = "../../README.md"
	readmeBegin = "<!-- synopsis: what framectl COMMAND -h prints (TestSynopsis in cmd/framectl checks it; -update rewrites it) -->"
	readmeEnd   = "<!-- end of synopsis -->"
)

// The README's "Operating it" block and the package doc's are the synopsis
// every command's -h prints, rendered from its flag set; the package doc's
// exit codes are the ones `framectl help` prints.
func TestSynopsis(t *testing.T) {
	syn := cliSynopsis(t)
	checkBlock(t, readmePath, func(src []string) (int, int, []string) {
		begin, end := slices.Index(src, readmeBegin), slices.Index(src, readmeEnd)
		if begin < 0 || end < begin {
			t.Fatalf("%s: no lines %q ... %q around the synopsis", readmePath, readmeBegin, readmeEnd)
		}
		return begin + 1, end, append(append([]string{"```sh"}, syn...), "```")
	})
	checkBlock(t, "doc.go", docBlock(t, "framectl ", syn))
	checkBlock(t, "doc.go", docBlock(t, "0 ", exitCodeLines(t)))
}

// cliSynopsis is every command's synopsis as its -h prints it, then the
// dispatcher's own.
func cliSynopsis(t *testing.T) []string {
	var lines []string
	for _, c := range commands {
		r := runCLI(t, c.name, "-h").want(t, exitOK)
		usage, _, _ := strings.Cut(r.stdout, "\n\n")
		for i, l := range strings.Split(usage, "\n") {
			lead := "       "
			if i == 0 {
				lead = "Usage: "
			}
			if !strings.HasPrefix(l, lead) {
				t.Fatalf("%s -h: line %q does not start with %q", c.name, l, lead)
			}
			lines = append(lines, strings.TrimPrefix(l, lead))
		}
	}
	return append(lines, "framectl help [COMMAND]")
}

// exitCodeLines is the table of exitCodesHelp, unindented.
func exitCodeLines(t *testing.T) []string {
	_, table, ok := strings.Cut(exitCodesHelp, "Exit codes:\n")
	table, _, _ = strings.Cut(table, "\n\n")
	var lines []string
	for _, l := range strings.Split(table, "\n") {
		if !ok || !strings.HasPrefix(l, "  ") {
			t.Fatalf("exitCodesHelp: no indented table after \"Exit codes:\": %q", exitCodesHelp)
		}
		lines = append(lines, l[2:])
	}
	return lines
}

// docBlock finds in a Go file the code block of the package doc whose
// first line starts with first, and renders want as that block.
func docBlock(t *testing.T, first string, want []string) func([]string) (int, int, []string) {
	return func(src []string) (int, int, []string) {
		begin := slices.IndexFunc(src, func(l string) bool { return strings.HasPrefix(l, "//\t"+first) })
		if begin < 0 {
			t.Fatalf("doc.go: no code block starting %q in the package doc", first)
		}
		end := begin
		for end < len(src) && strings.HasPrefix(src[end], "//\t") {
			end++
		}
		block := make([]string, len(want))
		for i, l := range want {
			block[i] = "//\t" + l
		}
		return begin, end, block
	}
}

// checkBlock fails the test unless the lines [begin, end) of path that
// find returns are the lines it renders; with -update it writes them.
func checkBlock(t *testing.T, path string, find func(src []string) (begin, end int, want []string)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Split(string(b), "\n")
	begin, end, want := find(src)
	if slices.Equal(src[begin:end], want) {
		return
	}
	if *update {
		src = slices.Replace(src, begin, end, want...)
		if err := os.WriteFile(path, []byte(strings.Join(src, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: rewrote lines %d to %d", path, begin+1, end)
		return
	}
	t.Errorf("%s, lines %d to %d, differ from what framectl prints (go test ./cmd/framectl -run TestSynopsis -update rewrites them):\n%s\nwant:\n%s",
		path, begin+1, end, strings.Join(src[begin:end], "\n"), strings.Join(want, "\n"))
}
