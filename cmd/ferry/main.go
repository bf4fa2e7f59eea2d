// Command ferry backs up, prepares and restores running MariaDB servers, physically and
// hot. Each verb lives in its own file; the work is done in internal/ packages.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// globals are the options every verb shares.
type globals struct {
	logFormat string
	logLevel  string
	// defaultsFile is --defaults-file of the verbs that have none of their own: where
	// the [ferry] groups are read.
	defaultsFile string
	log          *slog.Logger
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A closed pipe on stdout (backup --stream) becomes an EPIPE error to explain, not a
	// silent death by signal.
	signal.Ignore(syscall.SIGPIPE)
	// The driver's own log lines (a broken pipe when a private server shuts down) would
	// break the one-line error: ferry returns and explains every error it meets.
	mysql.SetLogger(&mysql.NopLogger{})
	if err := newRoot().ExecuteContext(ctx); err != nil {
		if !isReported(err) {
			fmt.Fprintln(os.Stderr, "ferry: "+oneLine(err.Error()))
		}
		os.Exit(1)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Hot physical backup, prepare and restore for MariaDB",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyOptionFile(cmd.Context(), cmd); err != nil {
				return err
			}
			return g.setup()
		},
	}
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format on stderr: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.defaultsFile, "defaults-file", "", "option file whose [ferry] and [ferry-VERB] groups give ferry's options (default: the usual my.cnf files); a verb that connects to a server also reads its [client] group")
	root.AddCommand(newBackupCmd(g), newPrepareCmd(g), newRestoreCmd(g), newListCmd(g), newVerifyCmd(g), newExpireCmd(g), newServeCmd(g), newCloneCmd(g), newKeygenCmd(),
		newSSTCmd(), newInstallSSTCmd(), newRecoverCmd(g), newBinlogArchiveCmd(g))
	return root
}

func (g *globals) setup() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch g.logFormat {
	case "text":
		g.log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	case "json":
		g.log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	default:
		return fmt.Errorf("--log-format %q: use text or json", g.logFormat)
	}
	return nil
}

// stderrIsTerminal decides between a progress bar and periodic log lines.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

func defaultParallel() int { return runtime.NumCPU() }
