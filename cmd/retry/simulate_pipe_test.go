//go:build unix

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A reader of the table that goes away (`retry simulate … | head -0`)
// ends the process when the table is written; the files were written
// first, and are complete.
func TestSimulateClosedStdoutKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody reads the table
	cmd := exec.Command(bin(t), "simulate", "--clients", "2000", "--outage", "2s", "--csv", "new.csv", "--out", "new.svg")
	cmd.Dir = dir
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	if err == nil {
		t.Log("the table was written before the pipe closed") // possible only if the write was buffered: still check the files
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "new.csv"))
	svg, _ := os.ReadFile(filepath.Join(dir, "new.svg"))
	if !strings.HasPrefix(string(csv), "time_s,") || !strings.Contains(string(svg), "</svg>") {
		t.Errorf("exit %v; new.csv %d bytes, new.svg %d bytes: want both complete", err, len(csv), len(svg))
	}
}
