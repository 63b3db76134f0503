package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestLastReleaseMatchesChangelog: the release `retry --version` names is
// the newest one CHANGELOG.md records (its first "## [x.y.z]" heading;
// "[Unreleased]" is skipped), and a build of another version says so.
func TestLastReleaseMatchesChangelog(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading such as ## [0.1.0]")
	}
	if want := "v" + string(m[1]); lastRelease != want {
		t.Errorf("lastRelease = %q, CHANGELOG.md's newest release is %q", lastRelease, want)
	}
	if v := versionString(); moduleVersion() != lastRelease && !strings.Contains(v, "; last release "+lastRelease+")") {
		t.Errorf("versionString() = %q: a build of %s does not name the last release", v, moduleVersion())
	}
}
