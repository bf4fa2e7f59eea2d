// Command ferry backs up, prepares and restores running MariaDB servers, physically and
// hot. Each verb lives in its own file; the work is done in internal/ packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
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
	ctx, stop := interruptible()
	defer stop()
	// A closed pipe on stdout (backup --stream) becomes an EPIPE error to explain, not a
	// silent death by signal.
	signal.Ignore(syscall.SIGPIPE)
	// The driver's own log lines (a broken pipe when a private server shuts down) would
	// break the one-line error: ferry returns and explains every error it meets.
	mysql.SetLogger(&mysql.NopLogger{})
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var sig interrupted
	code := exitCodeOf(err)
	var line string
	if errors.As(context.Cause(ctx), &sig) {
		// An interrupted run says so, whatever the error it ended with, and keeps what
		// the verb said about what it left where.
		line, code = interruptedLine(sig, err), sig.exitCode()
	} else if !isReported(err) {
		line = oneLine(flagText(err))
	}
	if line != "" {
		printError(os.Stderr, jsonLog(root, os.Args[1:]), line, code)
	}
	os.Exit(code)
}

// printError writes the run's last line: "ferry: " and the error, or with json one
// log record (level ERROR) carrying the exit code, as the lines before it are.
func printError(w io.Writer, json bool, line string, code int) {
	if !json {
		fmt.Fprintln(w, "ferry: "+line)
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error(line, "exit_code", code)
}

// jsonLog tells whether the run asked for --log-format json: as parsed, or, when the
// flags did not parse, as written on the command line.
func jsonLog(root *cobra.Command, args []string) bool {
	if f := root.PersistentFlags().Lookup("log-format"); f != nil && f.Changed {
		return f.Value.String() == "json"
	}
	for i, a := range args {
		if a == "--log-format=json" || a == "--log-format" && i+1 < len(args) && args[i+1] == "json" {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// interrupted is the cause of the context of a run stopped by SIGINT or SIGTERM.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

// exitCode is the shell's status for a process ended by the signal: 128 + its number
// (130 for SIGINT, 143 for SIGTERM).
func (i interrupted) exitCode() int { return 128 + int(i.sig) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// interruptible returns a context cancelled, with an interrupted cause, by the first
// SIGINT or SIGTERM. Later ones are caught and ignored while the verb cleans up; stop
// restores the default handling.
func interruptible() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			cancel(interrupted{sig: s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}

// interruptedLine is the one line of a run stopped by sig: what interrupted it, then
// what the verb said it left where, without the bare "context canceled" that every
// wait cut short carries.
func interruptedLine(sig interrupted, err error) string {
	msg := oneLine(flagText(err))
	for _, bare := range []string{context.Canceled.Error(), "operation was canceled"} {
		msg = strings.ReplaceAll(msg, ": "+bare, "")
		msg = strings.ReplaceAll(msg, bare+": ", "")
		msg = strings.ReplaceAll(msg, bare, "")
	}
	msg = strings.Trim(msg, " :;,")
	if msg == "" {
		return sig.Error()
	}
	return sig.Error() + ": " + msg
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Hot physical backup, prepare and restore for MariaDB",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := refusePassword(cmd.Flags(), false); err != nil {
				return err
			}
			skipped, err := applyOptionFile(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			if err := g.setup(); err != nil {
				return err
			}
			for _, s := range skipped {
				g.log.Debug(s)
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format on stderr: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.defaultsFile, "defaults-file", "", "option file whose [ferry] and [ferry-VERB] groups give ferry's options (default: the usual my.cnf files); a verb that connects to a server also reads its [client] group")
	root.AddCommand(newBackupCmd(g), newPrepareCmd(g), newRestoreCmd(g), newListCmd(g), newVerifyCmd(g), newExpireCmd(g), newCopyCmd(g), newServeCmd(g), newCloneCmd(g), newKeygenCmd(),
		newSSTCmd(), newInstallSSTCmd(), newRecoverCmd(g), newBinlogArchiveCmd(g), newVersionCmd(), newGenDocsCmd())
	markUsage(root)
	return root
}

func (g *globals) setup() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return usagef("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch g.logFormat {
	case "text":
		g.log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	case "json":
		opts.ReplaceAttr = secondsAttr
		g.log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
	default:
		return usagef("--log-format %q: use text or json", g.logFormat)
	}
	logOpenFiles(g.log)
	return nil
}

// secondsAttr writes a duration in a JSON log as seconds, a number, under its key
// with "_s" added ("took": 1.5s becomes "took_s": 1.5), for scripts to read.
func secondsAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_s") && !strings.HasSuffix(key, "_seconds") {
		key += "_s"
	}
	return slog.Float64(key, a.Value.Duration().Seconds())
}

// logOpenFiles says, at debug level, how many files ferry may hold open: the Go runtime
// raised the soft limit to the hard one at start. ferry holds about one file per copy
// worker and at most 1,000 tablespaces in the native apply, whatever the table count.
func logOpenFiles(log *slog.Logger) {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err == nil {
		log.Debug("open files limit (soft raised to the hard limit)", "soft", l.Cur, "hard", l.Max)
	}
}

// barOnStderr decides between a progress bar and periodic log lines: a bar on a
// terminal, unless every line must be JSON (--log-format json).
func (g *globals) barOnStderr() bool {
	return g.logFormat != "json" && term.IsTerminal(int(os.Stderr.Fd()))
}
