package main

import (
	"bufio"
	stdcmp "cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// framebench table [-units U,...] [-median] [FILE...]
//
// table prints `go test -bench` output (FILEs, or standard input) as a
// markdown table, the shape of BENCHMARKS.md's tables of go benchmarks:
// one row per benchmark, named as go test names it without "Benchmark"
// and without the -GOMAXPROCS suffix, and one column per unit (every unit
// in the order first seen, or -units' in its order). Values are printed
// as go test printed them. A benchmark that ran more than once in a file
// (-count) shows each run's value in order, separated by " / ", or their
// median with -median; with several FILEs, each file's part of a cell is
// separated by "; ", in the order the files are given, among the files
// that have the row (one that has the row but not the unit shows "–"):
// files of different benchmarks, or of one benchmark run with different
// settings, make one table of all their rows. Rows are in the order first
// seen.
func tableCmd(fs *flag.FlagSet, args []string) error {
	units := fs.String("units", "", "comma-separated units to print, in this order (default: every unit, in the order first seen)")
	med := fs.Bool("median", false, "print the median of a benchmark's runs in a file rather than each run")
	fs.Parse(args)
	var inputs []benchRuns
	if fs.NArg() == 0 {
		runs, err := readBenchRuns(os.Stdin)
		if err != nil {
			return err
		}
		inputs = append(inputs, runs)
	}
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		runs, err := readBenchRuns(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		inputs = append(inputs, runs)
	}
	var want []string
	if *units != "" {
		want = strings.Split(*units, ",")
	}
	return writeBenchTable(os.Stdout, inputs, want, *med)
}

// benchRuns is one file of go test -bench output: each benchmark's lines,
// in the order they came.
type benchRuns struct {
	names []string                       // in the order first seen
	lines map[string][]map[string]string // name -> each line's value by unit
	units []string                       // in the order first seen
}

// benchLine matches a result line: name, iterations, then value-unit
// pairs. A benchmark that writes output while it runs gets its name on a
// line of its own (benchName) and its results later on one that starts
// with the iterations (benchResult).
var (
	benchLine   = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	benchName   = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s*$`)
	benchResult = regexp.MustCompile(`^\s*\d+\s+(\S+ \S+.*)$`)
)

func readBenchRuns(r io.Reader) (benchRuns, error) {
	runs := benchRuns{lines: map[string][]map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pending := "" // a name whose results have not come yet
	for sc.Scan() {
		var name, results string
		if m := benchLine.FindStringSubmatch(sc.Text()); m != nil {
			name, results = m[1], m[2]
		} else if m := benchName.FindStringSubmatch(sc.Text()); m != nil {
			pending = m[1]
			continue
		} else if m := benchResult.FindStringSubmatch(sc.Text()); m != nil && pending != "" {
			name, results = pending, m[1]
		} else {
			continue
		}
		pending = ""
		f := strings.Fields(results)
		if len(f)%2 != 0 {
			continue // not a result line (a log line that starts alike)
		}
		vals := map[string]string{}
		for i := 0; i < len(f); i += 2 {
			if _, err := strconv.ParseFloat(f[i], 64); err != nil {
				vals = nil
				break
			}
			vals[f[i+1]] = f[i]
			if !slices.Contains(runs.units, f[i+1]) {
				runs.units = append(runs.units, f[i+1])
			}
		}
		if vals == nil {
			continue
		}
		if _, ok := runs.lines[name]; !ok {
			runs.names = append(runs.names, name)
		}
		runs.lines[name] = append(runs.lines[name], vals)
	}
	return runs, sc.Err()
}

func writeBenchTable(w io.Writer, inputs []benchRuns, units []string, med bool) error {
	var names []string
	for _, in := range inputs {
		for _, n := range in.names {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if len(units) == 0 {
			for _, u := range in.units {
				if !slices.Contains(units, u) {
					units = append(units, u)
				}
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no benchmark results in the input")
	}
	fmt.Fprintf(w, "| benchmark | %s |\n|---|%s\n", strings.Join(units, " | "), strings.Repeat("---|", len(units)))
	for _, n := range names {
		cells := make([]string, len(units))
		for i, u := range units {
			var parts []string
			for _, in := range inputs {
				if _, ok := in.lines[n]; !ok {
					continue // a row of other files only
				}
				var vs []string
				for _, l := range in.lines[n] {
					if v, ok := l[u]; ok {
						vs = append(vs, v)
					}
				}
				if med && len(vs) > 0 {
					vs = []string{medianString(vs)}
				}
				parts = append(parts, strings.Join(vs, " / "))
			}
			if strings.Join(parts, "") != "" {
				for j := range parts {
					if parts[j] == "" {
						parts[j] = "–"
					}
				}
				cells[i] = strings.Join(parts, "; ")
			}
		}
		fmt.Fprintf(w, "| %s | %s |\n", n, strings.Join(cells, " | "))
	}
	return nil
}

// medianString is the median of numbers as go test printed them, printed
// as it printed that one (the upper median of an even count, as median).
func medianString(vs []string) string {
	s := slices.Clone(vs)
	slices.SortFunc(s, func(a, b string) int {
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		return stdcmp.Compare(x, y)
	})
	return s[len(s)/2]
}
