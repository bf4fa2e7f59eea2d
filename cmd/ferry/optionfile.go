package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// applyOptionFile sets every flag the command line left unset from the option files:
// the [ferry] group, then [ferry-VERB] (e.g. [ferry-backup]), which wins. The files are
// the verb's --defaults-file if given, else the usual ones (/etc/my.cnf,
// /etc/mysql/my.cnf and what they include, ~/.my.cnf), read through my_print_defaults
// as MariaDB's own programs read them. An option of [ferry] that the verb lacks is
// ignored (the group serves every verb); one of [ferry-VERB] is an error.
func applyOptionFile(ctx context.Context, cmd *cobra.Command) error {
	if cmd.DisableFlagParsing || !cmd.HasParent() {
		return nil
	}
	verb := cmd.Name()
	var src optfile.Sources
	if f := cmd.Flags().Lookup("defaults-file"); f != nil {
		src.DefaultsFile = f.Value.String()
	}
	if _, err := exec.LookPath("my_print_defaults"); err != nil {
		if src.DefaultsFile == "" {
			return nil // no MariaDB client tools: only the command line counts
		}
	}
	onCommandLine := map[string]bool{}
	cmd.Flags().Visit(func(f *pflag.Flag) { onCommandLine[f.Name] = true })
	for _, group := range []string{"ferry", "ferry-" + verb} {
		opts, err := readGroup(ctx, src, group)
		if err != nil {
			return err
		}
		if err := setFlags(cmd.Flags(), opts, group, onCommandLine); err != nil {
			return err
		}
	}
	return nil
}

// readGroup reads one group through my_print_defaults, or, where it is missing, from
// the --defaults-file alone (without following !include).
func readGroup(ctx context.Context, src optfile.Sources, group string) (optfile.Options, error) {
	if _, err := exec.LookPath("my_print_defaults"); err != nil {
		return optfile.Read(src.DefaultsFile, group)
	}
	return optfile.ReadGroups(ctx, src, group)
}

// setFlags sets from opts the flags the command line did not set; an option that names
// no flag is refused in a verb's own group.
func setFlags(fs *pflag.FlagSet, opts optfile.Options, group string, onCommandLine map[string]bool) error {
	strict := group != "ferry"
	byName := map[string]*pflag.Flag{}
	fs.VisitAll(func(f *pflag.Flag) { byName[optfile.Name(f.Name)] = f })
	var errs []error
	for name, val := range opts {
		f, ok := byName[name]
		switch {
		case !ok && strict:
			errs = append(errs, fmt.Errorf("option %q in [%s] of the option files: ferry %s has no --%s; remove it or move it to [ferry]",
				name, group, strings.TrimPrefix(group, "ferry-"), strings.ReplaceAll(name, "_", "-")))
			continue
		case !ok || onCommandLine[f.Name] || f.Name == "defaults-file" || f.Name == "help":
			continue
		}
		if val == "" && f.Value.Type() == "bool" {
			val = "true" // a bare option in an option file turns a switch on
		}
		if err := fs.Set(f.Name, val); err != nil {
			errs = append(errs, fmt.Errorf("option %s=%s in [%s] of the option files: %v", name, val, group, err))
		}
	}
	return errors.Join(errs...)
}
