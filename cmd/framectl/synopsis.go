package main

import (
	"flag"
	"fmt"
	"strings"
)

// A command's synopsis is rendered from its flag set, so that the usage
// line `framectl COMMAND -h` prints cannot drift from the flags the
// command parses; the README's "Operating it" block and the package doc
// (doc.go) are that output, copied, and TestSynopsis fails when either
// differs (go test ./cmd/framectl -run TestSynopsis -update rewrites them).
//
// A form is one way to call the command, written with flag names only:
//
//	--bucket (--namespace [--tenant] | --namespace-id) --actor --out [--json [-v]]
//
// Each flag token ("--name" or "-name", inside any brackets, parentheses
// and bars) is looked up in the flag set and given its placeholder: the
// back-quoted word of its usage string, which PrintDefaults prints too
// ("bucket `URL`: ..." renders --bucket URL); "--out=DIR" overrides it in
// one form. A boolean flag takes none. Every other token (KEY, FILE) is
// printed as written. A form naming a flag the set does not define, a
// value flag without a placeholder, and a flag no form names are
// programming errors: the synopsis panics, as the flag package does on a
// flag defined twice, and TestHelp renders every command's.

// synopsisWidth is the column the synopsis lines wrap at: an 80-column
// terminal, after the "Usage: " that -h prints before them.
const synopsisWidth = 72

// synopsis returns the command's forms rendered from its flag set, each
// as "framectl NAME ..." wrapped at synopsisWidth, continuation lines
// indented under the first flag.
func (c *cmdFlags) synopsis() []string {
	named := map[string]bool{}
	var lines []string
	for _, form := range c.forms {
		units, err := renderForm(c.fs, form, named)
		if err != nil {
			panic(fmt.Sprintf("framectl %s: synopsis %q: %v", c.name, form, err))
		}
		lines = append(lines, wrapForm("framectl "+c.name+" ", units)...)
	}
	c.fs.VisitAll(func(f *flag.Flag) {
		if !named[f.Name] {
			panic(fmt.Sprintf("framectl %s: flag -%s is in no synopsis form: add it to the command's forms", c.name, f.Name))
		}
	})
	return lines
}

// renderForm renders form's tokens against fs and returns them grouped
// into the units a line may break between: the top-level words, a bracket
// or parenthesis group kept whole. named collects the flags it names.
func renderForm(fs *flag.FlagSet, form string, named map[string]bool) ([]string, error) {
	var units []string
	var cur []string
	depth := 0
	for _, tok := range strings.Fields(form) {
		open := len(tok) - len(strings.TrimLeft(tok, "[("))
		core := strings.TrimLeft(tok, "[(")
		closing := len(core) - len(strings.TrimRight(core, "])"))
		core = core[:len(core)-closing]
		if strings.HasPrefix(core, "-") {
			r, err := renderFlag(fs, core, named)
			if err != nil {
				return nil, err
			}
			core = r
		}
		cur = append(cur, tok[:open]+core+tok[len(tok)-closing:])
		if depth += open - closing; depth < 0 {
			return nil, fmt.Errorf("unbalanced %q", tok)
		}
		if depth == 0 {
			units = append(units, strings.Join(cur, " "))
			cur = nil
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced brackets")
	}
	return units, nil
}

// renderFlag renders one flag token, "--name" or "--name=PLACEHOLDER".
func renderFlag(fs *flag.FlagSet, tok string, named map[string]bool) (string, error) {
	dashes := tok[:len(tok)-len(strings.TrimLeft(tok, "-"))]
	name, override, _ := strings.Cut(tok[len(dashes):], "=")
	f := fs.Lookup(name)
	if f == nil {
		return "", fmt.Errorf("no flag -%s", name)
	}
	named[name] = true
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		if override != "" {
			return "", fmt.Errorf("-%s is boolean: it takes no %s", name, override)
		}
		return dashes + name, nil
	}
	placeholder := override
	if placeholder == "" {
		if !strings.Contains(f.Usage, "`") {
			return "", fmt.Errorf("-%s: its usage string has no `PLACEHOLDER` to show in the synopsis", name)
		}
		placeholder, _ = flag.UnquoteUsage(f)
	}
	return dashes + name + " " + placeholder, nil
}

// wrapForm joins units after prefix, breaking lines before the unit that
// would pass synopsisWidth.
func wrapForm(prefix string, units []string) []string {
	indent := strings.Repeat(" ", len(prefix))
	var lines []string
	line := prefix
	for i, u := range units {
		if i > 0 && len(line)+1+len(u) > synopsisWidth {
			lines = append(lines, line)
			line = indent + u
			continue
		}
		if i > 0 {
			line += " "
		}
		line += u
	}
	return append(lines, line)
}
