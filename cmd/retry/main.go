// Command retry runs a command or an HTTP request again, with exponential
// backoff and jitter, until it succeeds or the policy says to stop; it also
// prints backoff schedules, runs a self-contained demo and simulates many
// clients retrying at once.
//
// Exit statuses: 0 success; the command's own last status in command mode
// (126 not executable, 127 not found, 128+N killed by signal N); 125 bad
// input (retry's own usage errors, distinct from any status a wrapped
// command returns by convention, as timeout(1) and env(1) do); 22 final
// HTTP error status (retry http); 7 HTTP transport failure or incomplete
// response body; 130 (SIGINT) and 143 (SIGTERM), and 129 (SIGHUP) in
// command mode, when a signal ends a wait;
// 1 other errors.
//
// # License
//
// Apache License 2.0: see the LICENSE file in this module's directory.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status,
// printing at most one error line on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code := exitStatus(err)
	var ee *exitError
	if errors.As(err, &ee) && ee.msg == "" {
		return code // already reported (or the command's own status)
	}
	fmt.Fprintln(stderr, "retry: "+escapeLine(err.Error()))
	return code
}

// exitStatus is the exit status for an error a subcommand returned: its
// ExitCode (exitUsage for every usage error), or 1 if it names none.
func exitStatus(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
