package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMaxMemory(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "4GiB": 4 << 30, "2G": 2 << 30, "1000": 1000, "1.5KiB": 1536, "none": -1} {
		if got, err := parseMaxMemory(in); err != nil || got != want {
			t.Errorf("parseMaxMemory(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1GiB", "0", "4XB", "GiB", "lots", "Inf", "NaN"} {
		if _, err := parseMaxMemory(in); err == nil {
			t.Errorf("parseMaxMemory(%q) accepted", in)
		}
	}
	if got, err := parseMaxMemory(""); err != nil || got <= 0 || got > 4<<30 {
		t.Errorf("default %v, %v", got, err)
	}
}

// FuzzParseMaxMemory: --max-memory never panics and yields a positive
// limit, "no limit" (-1) or an error.
func FuzzParseMaxMemory(f *testing.F) {
	for _, s := range []string{"", "none", "4GiB", "512MiB", "1.5K", "0", "-1", "1e30T", "NaNGiB", "Inf", "GiB", "4XB", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseMaxMemory(s)
		if err == nil && v <= 0 && v != -1 {
			t.Fatalf("parseMaxMemory(%q) = %d, nil", s, v)
		}
		if err != nil && (err.Error() == "" || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("parseMaxMemory(%q): error %q", s, err)
		}
	})
}

// The default --max-memory respects a container's memory limit (its
// cgroup), not only the host's MemAvailable, which a container sees whole.
func TestCgroupAvailable(t *testing.T) {
	write := func(dir, name, v string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2 := t.TempDir()
	write(v2, "memory.max", "1073741824\n")
	write(v2, "memory.current", "73741824\n")
	if got, ok := cgroupAvailable(v2); !ok || got != 1_000_000_000 {
		t.Errorf("v2: %d, %v; want 1e9", got, ok)
	}
	write(v2, "memory.max", "max\n")
	if _, ok := cgroupAvailable(v2); ok {
		t.Error("v2 without a limit read as one")
	}
	v1 := t.TempDir()
	write(v1, "memory/memory.limit_in_bytes", "536870912\n")
	write(v1, "memory/memory.usage_in_bytes", "36870912\n")
	if got, ok := cgroupAvailable(v1); !ok || got != 500_000_000 {
		t.Errorf("v1: %d, %v; want 5e8", got, ok)
	}
	write(v1, "memory/memory.limit_in_bytes", "9223372036854771712\n")
	if _, ok := cgroupAvailable(v1); ok {
		t.Error("v1 without a limit read as one")
	}
	if _, ok := cgroupAvailable(t.TempDir()); ok {
		t.Error("no cgroup files read as a limit")
	}
	// The page cache counts in the usage; its inactive part is given back
	// on demand, so it is not taken as used.
	write(v2, "memory.max", "2147483648\n")
	write(v2, "memory.current", "2139095040\n") // 2 GiB - 8 MiB
	write(v2, "memory.stat", "anon 100\ninactive_file 1610612736\nactive_file 5\n")
	if got, ok := cgroupAvailable(v2); !ok || got != 2147483648-2139095040+1610612736 {
		t.Errorf("v2 with page cache: %d, %v; want the limit less the working set", got, ok)
	}
	// A usage over the limit says nothing usable: left to MemAvailable.
	write(v2, "memory.current", "2147500000\n")
	write(v2, "memory.stat", "anon 100\n")
	if got, ok := cgroupAvailable(v2); ok {
		t.Errorf("v2 with usage over the limit read as %d available", got)
	}
}
