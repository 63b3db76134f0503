package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit statuses of the retry binary (see the package comment).
const (
	exitUsage      = 125 // bad input: retry's own usage errors (as timeout(1) and env(1))
	exitHTTPStatus = 22  // retry http: the final response had status >= 400
	exitTransport  = 7   // retry http: no response, or its body ended early (connection, timeout, ...)
	exitSIGINT     = 130 // a SIGINT ended a wait
	exitSIGTERM    = 143 // a SIGTERM ended a wait
	exitNotExec    = 126 // the command exists but cannot be executed
	exitNotFound   = 127 // the command was not found
)

// exitError carries an exit status. An empty msg means nothing more is
// printed (the failure was already reported, or is the command's own).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// usagef returns a bad-input error: one line, exit status exitUsage.
func usagef(format string, a ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "retry [policy flags] [--on-exit CODES] -- COMMAND [ARG...]",
		Short: "Retry a command or an HTTP request with exponential backoff and jitter",
		Long: `retry runs COMMAND and, while it exits non-zero (or with one of --on-exit CODES),
waits and runs it again as the policy flags say. It exits with the command's last
exit status.

Each attempt runs in a process group of its own. When retry is in the foreground
of a terminal, that group gets the terminal for the attempt (as a shell's job
does): the command reads the terminal, and Ctrl-C, Ctrl-\ and Ctrl-Z reach it
directly; retry takes the terminal back between attempts. An attempt ended by
SIGINT or SIGQUIT (Ctrl-C, Ctrl-\), or that exits 130 (the status of a command that
handled Ctrl-C; unless --on-exit lists 130), is not retried; a command that handles Ctrl-C and exits with
another status is retried like any failure. SIGINT, SIGTERM and SIGHUP sent to
retry itself are forwarded to the command's whole group and stop the retries; a
signal during a wait ends it with status 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
SIGINT and SIGHUP stay ignored, for retry and the command, when retry was started
with them ignored (nohup, a background job of a shell without job control).

Standard input goes to the first attempt only: later attempts read /dev/null.
Standard output and standard error of the command pass through unchanged.
With --attempt-timeout, a command still running at the limit gets SIGTERM, sent to
its whole process group (background jobs included), and SIGKILL 2s later if any of
the group is left; the next attempt starts once the group is gone. The attempt
counts as failed and retryable, even if the command exits 0 on the SIGTERM (retry
then exits 143 if it gives up). An attempt that --max-elapsed leaves no time is not
started (retry then exits 1 if it gives up).

The defaults are the library's: waits of 1s, 2s, 4s, ... capped at 32s, each plus
a random 0..1s, at most 10 attempts. Durations use Go syntax: 250ms, 1m30s.

Exit statuses: 0 success; the command's own status; 125 bad input (retry's own
usage errors: one line on stderr naming the flag or argument; no command run, no
request sent); 126/127 command not executable/not found; 130/143 interrupted
during a wait (or a retry simulate run); for retry http: 22 final HTTP status
>= 400, 7 no response or an incomplete response body, 1 the body could not be
written.`,
		Example: `  retry -- curl -fsS http://127.0.0.1:8080/health
  retry --attempts 5 --initial 250ms --jitter full -- make test
  retry --on-exit 75,111 --max-elapsed 2m -- ./deploy.sh
  retry demo`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: false,
		},
	}
	pf := addPolicyFlags(root)
	var onExit string
	root.Flags().StringVar(&onExit, "on-exit", "", "retry only on these exit codes, e.g. 1,75,100-110 (default: any non-zero)")
	// --version is retry's own flag, not cobra's, which prints the version
	// whatever else the command line holds (retry --version extra).
	var version bool
	root.Flags().BoolVar(&version, "version", false, "print the version of retry, as retry version does")
	root.Flags().SetInterspersed(false)
	root.RunE = func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
		if version {
			if len(args) > 0 || dash >= 0 {
				return usagef("--version takes no arguments")
			}
			return printVersion(cmd.OutOrStdout())
		}
		if dash < 0 {
			if len(args) == 0 {
				return usagef("no command given: use retry [flags] -- COMMAND [ARG...] (see retry --help)")
			}
			return usagef("unknown command %q: put the command to run after --, as in retry -- %s", args[0], args[0])
		}
		if dash > 0 {
			return usagef("unexpected argument %q before --", args[0])
		}
		if len(args) == 0 {
			return usagef("no command after --")
		}
		codes, err := parseExitCodes(onExit)
		if err != nil {
			return err
		}
		p, err := pf.policy()
		if err != nil {
			return err
		}
		return runCommand(cmd.Context(), p, pf, codes, args, os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usagef("%s", flagError(err))
	})
	root.AddCommand(newHTTPCmd(), newScheduleCmd(), newDemoCmd(), newVersionCmd(), newSimulateCmd())
	root.SetHelpCommand(newHelpCmd(root))
	root.InitDefaultCompletionCmd()
	strictCompletion(root)
	return root
}

// newHelpCmd is `retry help [COMMAND]`: an unknown COMMAND is a usage error,
// not a help page with status 0.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(_ *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || c == nil || len(rest) > 0 {
				return usagef("help: unknown command %q (see retry --help)", strings.Join(args, " "))
			}
			c.InitDefaultHelpFlag()
			return c.Help()
		},
	}
}

// strictCompletion makes `retry completion` with no shell or an unknown one
// a usage error (cobra prints its help page and exits 0).
func strictCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sub := range c.Commands() {
			shells = append(shells, sub.Name())
			sub.Args = noArgs
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("completion: want a shell: %s", strings.Join(shells, ", "))
			}
			return usagef("completion: unknown shell %q: want %s", args[0], strings.Join(shells, ", "))
		}
	}
}

// flagError words a flag parsing error for the user: a value that does not
// parse names the flag, the value and what the flag wants, not the Go
// function that failed (strconv.ParseInt: parsing "abc": invalid syntax).
func flagError(err error) string {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err.Error()
	}
	want := ""
	switch ive.GetFlag().Value.Type() {
	case "int":
		want = "want a whole number"
	case "uint64":
		want = "want a whole number, 0 or more"
	case "float64":
		want = "want a number, such as 1.5"
	case "duration":
		want = "want a duration such as 250ms or 1m30s"
	case "bool":
		want = "want true or false"
	}
	if errors.Is(err, strconv.ErrRange) {
		want = "out of range"
	}
	if want == "" {
		want = errors.Unwrap(err).Error()
	}
	return fmt.Sprintf("--%s %q: %s", ive.GetFlag().Name, ive.GetValue(), want)
}
