package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit statuses of the retry binary (see the package comment).
const (
	exitUsage      = 2   // bad command line
	exitHTTPStatus = 22  // retry http: the final response had status >= 400
	exitTransport  = 7   // retry http: no response (connection, timeout, ...)
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

// usagef returns a bad-input error: one line, exit status 2.
func usagef(format string, a ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "retry [policy flags] [--on-exit CODES] -- COMMAND [ARG...]",
		Short: "Retry a command or an HTTP request with exponential backoff and jitter",
		Long: `retry runs COMMAND and, while it exits non-zero (or with one of --on-exit CODES),
waits and runs it again as the policy flags say. It exits with the command's last
exit status. SIGINT and SIGTERM are forwarded to the running command and stop the
retries; a signal during a wait ends it with status 130 (SIGINT) or 143 (SIGTERM).

Standard input goes to the first attempt only: later attempts read /dev/null.
Standard output and standard error of the command pass through unchanged.
With --attempt-timeout, a command still running at the limit gets SIGTERM (SIGKILL
2s later) and the attempt counts as failed and retryable.

The defaults are the library's: waits of 1s, 2s, 4s, ... capped at 32s, each plus
a random 0..1s, at most 10 attempts. Durations use Go syntax: 250ms, 1m30s.

Exit statuses: 0 success; the command's own status; 2 bad input; 126/127 command
not executable/not found; 130/143 interrupted during a wait; for retry http:
22 final HTTP status >= 400, 7 no response.`,
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
	root.Flags().SetInterspersed(false)
	root.RunE = func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
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
		return usagef("%v", err)
	})
	root.AddCommand(newHTTPCmd(), newScheduleCmd(), newDemoCmd(), newVersionCmd(), newSimulateCmd())
	return root
}
