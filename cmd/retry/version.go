package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// moduleVersion is the version `go install ...@version` recorded in the
// binary, or "devel" for a local build.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// lastRelease is the newest version in the repository's CHANGELOG.md
// (TestLastReleaseMatchesChangelog keeps the two equal): the version a
// binary installed from that release's tag reports.
const lastRelease = "v0.1.0"

// versionString is what `retry version` and `retry --version` print after
// "retry ": the module version and the Go version, as "v0.1.0 (go1.26.0)"
// for a binary of the last release; any other build (a local "devel"
// build, a pseudo-version) also names the last release, as in
// "devel (go1.26.0; last release v0.1.0)".
func versionString() string {
	v := moduleVersion()
	if v == lastRelease {
		return v + " (" + runtime.Version() + ")"
	}
	return v + " (" + runtime.Version() + "; last release " + lastRelease + ")"
}

// printVersion writes what retry version and retry --version print.
func printVersion(w io.Writer) error {
	_, err := fmt.Fprintf(w, "retry %s\n", versionString())
	return err
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of retry",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return printVersion(cmd.OutOrStdout()) },
	}
}
