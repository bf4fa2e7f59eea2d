package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagDefaults checks every flag whose default is a tunable of internal/defaults
// against that table: a flag either starts from the table's value (pflag prints it), or
// is left zero for the engine to choose and its help prints the engine's value.
func TestFlagDefaults(t *testing.T) {
	root := newRoot()
	for _, c := range []struct {
		cmd, flag string
		def       string // the flag's own default, or "0" when the engine chooses
		help      string // what the help must say when it does
	}{
		{"backup", "parallel", strconv.Itoa(defaults.BackupParallel), ""},
		{"backup", "max-memory", sizeText(defaults.PipelineMemory), ""},
		{"backup", "safe-slave-backup-timeout", defaults.SafeSlaveTimeout.String(), ""},
		{"backup", "chunk-size", "0", "default " + sizeText(defaults.ChunkSize) + " for a directory, " + sizeText(defaults.RemoteChunkSize) + " for a stream, a repository"},
		{"backup", "part-size", "0", "default " + sizeText(defaults.PartSize)},
		{"backup", "uploads", "0", "default " + strconv.Itoa(defaults.Uploads)},
		{"serve", "parallel", strconv.Itoa(defaults.DonorParallel()), "one per core"},
		{"serve", "max-memory", "0", "default " + sizeText(defaults.CloneMemory)},
		{"serve", "reconnect-wait", defaults.CloneGrace.String(), ""},
		{"clone", "streams", strconv.Itoa(defaults.CloneStreams), ""},
		{"clone", "reconnect-wait", defaults.CloneGrace.String(), ""},
		{"restore", "parallel", "0", "default: one per core), objects downloaded at once from a repository (default " + strconv.Itoa(defaults.Downloads)},
		{"restore", "replay-threads", "0", "default: twice the cores"},
		{"verify", "parallel", strconv.Itoa(defaults.Downloads), ""},
	} {
		f := lookup(t, root, c.cmd, c.flag)
		if f.DefValue != c.def {
			t.Errorf("%s --%s: default %s, want %s (internal/defaults)", c.cmd, c.flag, f.DefValue, c.def)
		}
		if !strings.Contains(f.Usage, c.help) {
			t.Errorf("%s --%s: help %q does not say %q", c.cmd, c.flag, f.Usage, c.help)
		}
	}
}

// TestNoDefaultTwice fails on a help text that writes a default by hand for a flag
// whose own non-zero default pflag prints too: the two drift apart.
func TestNoDefaultTwice(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			zero := f.DefValue == "" || f.DefValue == "0" || f.DefValue == "false" || f.DefValue == "[]" || f.DefValue == "0s"
			if !zero && strings.Contains(f.Usage, "(default") {
				t.Errorf("%s --%s: the help writes a default and pflag prints %q too", c.CommandPath(), f.Name, f.DefValue)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

func lookup(t *testing.T, root *cobra.Command, cmd, flag string) *pflag.Flag {
	t.Helper()
	c, _, err := root.Find([]string{cmd})
	if err != nil || c.Name() != cmd {
		t.Fatalf("no command %s: %v", cmd, err)
	}
	f := c.Flags().Lookup(flag)
	if f == nil {
		t.Fatalf("%s has no --%s", cmd, flag)
	}
	return f
}
