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

// versionString is what `retry version` and `retry --version` print after
// "retry ": the module version and the Go version.
func versionString() string { return moduleVersion() + " (" + runtime.Version() + ")" }

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
