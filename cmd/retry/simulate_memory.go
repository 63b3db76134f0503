package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/retrykit/retry/sim"
)

// parseMaxMemory reads --max-memory: a byte count with an optional binary
// unit (KiB, MiB, GiB, TiB; K, M, G, T mean the same), or "none". Empty
// means sim.DefaultMaxMemory, or the memory available now if that is less.
func parseMaxMemory(s string) (int64, error) {
	switch s {
	case "":
		limit := int64(sim.DefaultMaxMemory)
		if avail, ok := memAvailable(); ok && avail < limit {
			limit = avail
		}
		return limit, nil
	case "none":
		return -1, nil
	}
	num := strings.TrimRight(s, "KMGTiBb")
	unit := strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "i")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, errors.New("want a positive size such as 512MiB or 4GiB, or none")
	}
	shift, ok := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[unit]
	if !ok {
		return 0, errors.New("unknown unit (want KiB, MiB, GiB or TiB)")
	}
	b := v * float64(uint64(1)<<shift)
	if b >= math.MaxInt64/2 {
		return -1, nil
	}
	return max(int64(b), 1), nil
}

// memAvailable is the memory a run may take now: MemAvailable from
// /proc/meminfo (Linux), or less if retry's memory cgroup (a container's
// limit) leaves less, since the OOM killer enforces that one; ok is false
// when neither is known.
func memAvailable() (int64, bool) {
	avail, ok := memInfoAvailable()
	if c, cok := cgroupAvailable("/sys/fs/cgroup"); cok && (!ok || c < avail) {
		return c, true
	}
	return avail, ok
}

// cgroupAvailable reads the limit and the usage of the memory cgroup
// mounted under root, as a container sees its own: cgroup v2
// (memory.max, memory.current) or v1 (memory/memory.limit_in_bytes,
// memory/memory.usage_in_bytes). ok is false without a limit.
func cgroupAvailable(root string) (int64, bool) {
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil && v >= 0 // "max" (no limit) does not parse
	}
	for _, f := range [][4]string{{"memory.max", "memory.current", "memory.stat", "inactive_file"},
		{"memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "memory/memory.stat", "total_inactive_file"}} {
		limit, ok := read(f[0])
		if !ok || limit >= 1<<62 { // v1 reports no limit as about 2^63
			continue
		}
		used, _ := read(f[1])
		// The usage counts the page cache, which the kernel gives back on
		// demand: the working set leaves out its inactive part, as the
		// kubelet's does.
		used -= min(statField(filepath.Join(root, f[2]), f[3]), used)
		if used >= limit {
			return 0, false // unknown: leave it to MemAvailable
		}
		return limit - used, true
	}
	return 0, false
}

// statField returns the value of key in a memory.stat file, 0 if absent.
func statField(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// memInfoAvailable reads MemAvailable from /proc/meminfo (Linux); ok is
// false elsewhere.
func memInfoAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "MemAvailable:"); found {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil || kb <= 0 {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
