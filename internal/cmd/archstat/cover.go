package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// readProfile maps each file of a coverage profile to its blocks
// ("12.5,14.2") and their counts, summed where a block is listed more than
// once (-coverpkg lists it once per test binary).
func readProfile(path string) (map[string]map[string]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := map[string]map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line) // name.go:12.5,14.2 3 1
		if len(f) != 3 || strings.HasPrefix(line, "mode:") {
			continue
		}
		colon := strings.LastIndex(f[0], ":")
		n, err := strconv.Atoi(f[2])
		if colon < 0 || !strings.Contains(f[0][colon:], ".") || err != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		file, block := f[0][:colon], f[0][colon+1:]
		if p[file] == nil {
			p[file] = map[string]int{}
		}
		p[file][block] += n
	}
	return p, nil
}

// coverDiff prints the files whose blocks have counts that differ between
// the profiles a and b: their blocks, how many ran in each, how many differ,
// and with verbose the blocks that differ.
func coverDiff(w io.Writer, pathA, pathB string, verbose bool) error {
	a, err := readProfile(pathA)
	if err != nil {
		return err
	}
	b, err := readProfile(pathB)
	if err != nil {
		return err
	}
	files := map[string]bool{}
	for f := range a {
		files[f] = true
	}
	for f := range b {
		files[f] = true
	}
	var sorted []string
	for f := range files {
		sorted = append(sorted, f)
	}
	sort.Strings(sorted)
	printf(w, "A = %s\nB = %s\n\n  blocks  ran-A  ran-B  differ  file\n", pathA, pathB)
	nDiffer := 0
	for _, f := range sorted {
		blocks := map[string]bool{}
		for k := range a[f] {
			blocks[k] = true
		}
		for k := range b[f] {
			blocks[k] = true
		}
		var differ []string
		ranA, ranB := 0, 0
		for k := range blocks {
			ranA, ranB = ranA+min(a[f][k], 1), ranB+min(b[f][k], 1)
			if a[f][k] != b[f][k] {
				differ = append(differ, k)
			}
		}
		if len(differ) == 0 {
			continue
		}
		nDiffer++
		printf(w, "  %6d  %5d  %5d  %6d  %s\n", len(blocks), ranA, ranB, len(differ), f)
		if verbose {
			sort.Slice(differ, func(i, j int) bool { return line(differ[i]) < line(differ[j]) })
			for _, k := range differ {
				printf(w, "          %-14s %d → %d\n", k, a[f][k], b[f][k])
			}
		}
	}
	printf(w, "\n%d of %d files have blocks whose counts differ\n", nDiffer, len(files))
	return nil
}

// line is the first line of a block "12.5,14.2".
func line(block string) int {
	n, _ := strconv.Atoi(block[:strings.IndexByte(block, '.')])
	return n
}
