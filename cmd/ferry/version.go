package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ferry's version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printVersion(cmd.OutOrStdout(), buildCommit())
			return nil
		},
	}
}

// printVersion writes one line: "ferry VERSION (commit C, go1.x, linux/amd64)".
func printVersion(w io.Writer, commit string) {
	fmt.Fprintf(w, "ferry %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// commit is set at build time with -ldflags "-X main.commit=..." where Go does not
// record it (-buildvcs=false, a build from a source archive).
var commit string

// buildCommit is the commit the binary was built from: -X main.commit, else as Go
// records it (vcs.revision, "-dirty" added for uncommitted changes), else "unknown".
func buildCommit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
