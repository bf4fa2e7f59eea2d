package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestInterruptedLine: an interrupted run's one line names the signal, keeps what the
// verb said it left where, and never shows the bare "context canceled".
func TestInterruptedLine(t *testing.T) {
	sig := interrupted{sig: syscall.SIGINT}
	for err, want := range map[error]string{
		context.Canceled: "interrupted by SIGINT",
		fmt.Errorf("prepare /d/.x.ferry-staging-1: %w; the partial restore is kept in /d/.x: run the same command with --resume to continue it", context.Canceled): "interrupted by SIGINT: prepare /d/.x.ferry-staging-1; the partial restore is kept in /d/.x: run the same command with --resume to continue it",
		errors.New("copy ibdata1: read tcp: operation was canceled"): "interrupted by SIGINT: copy ibdata1: read tcp",
		errors.New("mariadbd exited during recovery"):                "interrupted by SIGINT: mariadbd exited during recovery",
	} {
		got := interruptedLine(sig, err)
		if got != want {
			t.Errorf("interruptedLine(%q) = %q, want %q", err, got, want)
		}
		if strings.Contains(got, "canceled") {
			t.Errorf("%q still says canceled", got)
		}
	}
	if c := (interrupted{sig: syscall.SIGTERM}).exitCode(); c != 143 {
		t.Errorf("SIGTERM exit code %d, want 143", c)
	}
	if c := sig.exitCode(); c != 130 {
		t.Errorf("SIGINT exit code %d, want 130", c)
	}
}
