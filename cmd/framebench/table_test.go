package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchTable: rows by name without the GOMAXPROCS suffix, columns by
// unit, repeated runs of a file joined by " / " (or their median), files
// joined by "; " where they have the row (a row of one file alone has one
// part), and a result printed on its own line after the benchmark's
// output still counted.
func TestBenchTable(t *testing.T) {
	run1 := `goos: linux
BenchmarkCodec/fixture=a/codec=x/decode-2         	     100	   1000 ns/op	 171.00 MB/s	         0.3970 ratio
BenchmarkCodec/fixture=a/codec=x/decode-2         	     100	   1000 ns/op	 180.00 MB/s	         0.3970 ratio
BenchmarkCodec/fixture=a/codec=x/decode-2         	     100	   1000 ns/op	 150.00 MB/s	         0.3970 ratio
BenchmarkHost/actors=100-2
    some output line
       1	  5000 ns/op	  21834 heapB/actor
PASS
`
	run2 := `BenchmarkCodec/fixture=a/codec=x/decode-2   100   1000 ns/op   212.00 MB/s   0.3970 ratio
`
	parse := func(s string) benchRuns {
		r, err := readBenchRuns(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		files  []string
		units  []string
		median bool
		want   string
	}{
		{[]string{run1}, []string{"MB/s", "heapB/actor"}, false, "| benchmark | MB/s | heapB/actor |\n|---|---|---|\n" +
			"| Codec/fixture=a/codec=x/decode | 171.00 / 180.00 / 150.00 |  |\n" +
			"| Host/actors=100 |  | 21834 |\n"},
		{[]string{run1, run2}, []string{"MB/s"}, true, "| benchmark | MB/s |\n|---|---|\n" +
			"| Codec/fixture=a/codec=x/decode | 171.00; 212.00 |\n" +
			"| Host/actors=100 |  |\n"},
		{[]string{run2, run1}, []string{"ratio", "heapB/actor"}, true, "| benchmark | ratio | heapB/actor |\n|---|---|---|\n" +
			"| Codec/fixture=a/codec=x/decode | 0.3970; 0.3970 |  |\n" +
			"| Host/actors=100 |  | 21834 |\n"},
	} {
		var in []benchRuns
		for _, f := range c.files {
			in = append(in, parse(f))
		}
		var out bytes.Buffer
		if err := writeBenchTable(&out, in, c.units, c.median); err != nil {
			t.Fatal(err)
		}
		if out.String() != c.want {
			t.Errorf("units %v, median %v: got\n%s\nwant\n%s", c.units, c.median, out.String(), c.want)
		}
	}
}

// TestThousands: integers with commas every three digits, negative ones
// too.
func TestThousands(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 30123.4: "30,123", 1234567: "1,234,567", -2500: "-2,500", -250: "-250"} {
		if got := thousands(x); got != want {
			t.Errorf("thousands(%v) = %q, want %q", x, got, want)
		}
	}
}
