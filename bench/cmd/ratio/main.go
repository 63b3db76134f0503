// Command ratio reads `go test -bench` output of the bench module and prints,
// per workload, retrykit's median time per operation, the best peer's, and
// their ratio (below 1 means retrykit is faster). Sub-benchmarks must be
// named Benchmark<Workload>/lib=<name>. Baselines are never counted as
// peers: lib=nethttp (the plain net/http client), lib=grpc (a bare gRPC
// call) and lib=floor (the hand-written delay arithmetic); where a workload
// has a floor, a second table gives retrykit's ratio to it.
//
// Usage: go run ./cmd/ratio results/bench-*.txt (or standard input).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var line = regexp.MustCompile(`^Benchmark([^/\s]+)/lib=([^-\s]+)(?:-\d+)?\s+\d+\s+([0-9.e+]+) ns/op(.*)$`)
var allocs = regexp.MustCompile(`([0-9.]+) allocs/op`)

type sample struct{ ns, allocs []float64 }

// baseline names the libraries that are reference points, not peers.
var baseline = map[string]bool{"nethttp": true, "grpc": true, "floor": true}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func main() {
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		var rs []io.Reader
		for _, name := range os.Args[1:] {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "ratio:", err)
				os.Exit(2)
			}
			defer f.Close()
			rs = append(rs, f)
		}
		in = io.MultiReader(rs...)
	}
	data := map[string]map[string]*sample{}
	var order []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		w, lib := m[1], m[2]
		ns, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		if data[w] == nil {
			data[w] = map[string]*sample{}
			order = append(order, w)
		}
		s := data[w][lib]
		if s == nil {
			s = &sample{}
			data[w][lib] = s
		}
		s.ns = append(s.ns, ns)
		if a := allocs.FindStringSubmatch(m[4]); a != nil {
			f, _ := strconv.ParseFloat(a[1], 64)
			s.allocs = append(s.allocs, f)
		}
	}
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "ratio: no Benchmark<Workload>/lib=<name> lines in the input")
		os.Exit(1)
	}
	fmt.Printf("%-18s %14s %7s %-14s %14s %7s %9s\n", "workload", "retrykit", "allocs", "best peer", "peer", "allocs", "ratio")
	for _, w := range order {
		rk := data[w]["retrykit"]
		best, bestNS := "", 0.0
		for lib, s := range data[w] {
			if lib == "retrykit" || baseline[lib] {
				continue
			}
			if m := median(s.ns); best == "" || m < bestNS {
				best, bestNS = lib, m
			}
		}
		if rk == nil || best == "" {
			continue
		}
		r := median(rk.ns)
		fmt.Printf("%-18s %11.4g ns %7.4g %-14s %11.4g ns %7.4g %9.3f\n", w, r, median(rk.allocs),
			best, bestNS, median(data[w][best].allocs), r/bestNS)
	}
	header := false
	for _, w := range order {
		rk, fl := data[w]["retrykit"], data[w]["floor"]
		if rk == nil || fl == nil {
			continue
		}
		if !header {
			fmt.Printf("\n%-18s %14s %14s %9s\n", "workload", "retrykit", "floor", "ratio")
			header = true
		}
		fmt.Printf("%-18s %11.4g ns %11.4g ns %9.3f\n", w, median(rk.ns), median(fl.ns), median(rk.ns)/median(fl.ns))
	}
}
