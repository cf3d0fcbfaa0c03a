package cmd

import (
	"errors"
	"fmt"
)

// Exit codes, decided in one place (Execute) from the error a command
// returns.
const (
	exitOK          = 0
	exitPodFailed   = 1 // a pod failed or timed out, or any other failure
	exitChanges     = 1 // plan: something would change
	exitBadInput    = 2 // a manifest or a flag is wrong
	exitUnreachable = 3 // the container runtime cannot be reached
)

// exitError carries the exit code a command's failure means.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func badInput(err error) error           { return &exitError{code: exitBadInput, err: err} }
func unreachable(err error) error        { return &exitError{code: exitUnreachable, err: err} }
func podsFailed(err error) error         { return &exitError{code: exitPodFailed, err: err} }
func badInputf(f string, a ...any) error { return badInput(fmt.Errorf(f, a...)) }

// errSilent means "exit with this code, the command has said why already".
var errSilent = errors.New("")

// exitCode maps an error to the process's exit status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitPodFailed
}
