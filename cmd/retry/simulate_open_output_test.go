package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulateOpenCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.csv")
	if _, _, err := simulate(t, "--scenario", "bronson", "--duration", "100s", "--compare", "plain,no-retry", "--csv", path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 101 || !strings.HasPrefix(lines[0], "time_s,plain_arrivals,plain_sent,") ||
		!strings.HasPrefix(lines[6], "5,280,280,0,0,280,280,0,0,280,") {
		t.Errorf("%d lines:\n%s\n%s", len(lines), lines[0], lines[6])
	}
	if _, _, err := simulate(t, "--scenario", "bronson", "--csv", path, "--sweep", "rate=100:200:100,trigger-for=1s:2s:1s"); err == nil ||
		!strings.Contains(err.Error(), "--csv writes a time series") {
		t.Errorf("--csv with --sweep: %v", err)
	}
}

func TestSimulateOpenPlot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"t.png", "t.svg"} {
		path := filepath.Join(dir, name)
		if _, _, err := simulate(t, "--scenario", "bronson", "--duration", "120s", "--compare", "plain,budget", "--out", path); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
