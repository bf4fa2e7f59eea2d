package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
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
// ignored when another verb has it (the group serves every verb), and an error when
// none has (a typo); one of [ferry-VERB] that the verb lacks is an error.
//
// A flag of a group of mutually exclusive ones (exclusiveGroups) is not set from a file
// when the command line set any flag of its group, nor from [ferry] when [ferry-VERB]
// sets one: the stronger source chooses within the group. What was left out so is
// returned, to be logged at debug level once the log is set up.
func applyOptionFile(ctx context.Context, cmd *cobra.Command) (skipped []string, err error) {
	if cmd.DisableFlagParsing || !cmd.HasParent() {
		return nil, nil
	}
	verb := cmd.Name()
	var src optfile.Sources
	if f := cmd.Flags().Lookup("defaults-file"); f != nil {
		src.DefaultsFile = f.Value.String()
	}
	if _, err := exec.LookPath("my_print_defaults"); err != nil {
		if src.DefaultsFile == "" {
			return nil, nil // no MariaDB client tools: only the command line counts
		}
	}
	groups := []string{"ferry", "ferry-" + verb}
	read := make([]optfile.Options, len(groups))
	for i, group := range groups {
		if read[i], err = readGroup(ctx, src, group); err != nil {
			return nil, err
		}
	}
	onCommandLine := map[string]bool{}
	cmd.Flags().Visit(func(f *pflag.Flag) { onCommandLine[f.Name] = true })
	// stronger[i] holds the flags set by a source that wins over group i.
	verbSet := map[string]bool{}
	for name := range read[1] {
		verbSet[strings.ReplaceAll(name, "_", "-")] = true
	}
	for k := range onCommandLine {
		verbSet[k] = true
	}
	stronger := []map[string]bool{verbSet, onCommandLine}
	exclusive := exclusiveGroups(verb)
	anyVerb := verbOptions(cmd.Root())
	for i, group := range groups {
		s, err := setFlags(cmd.Flags(), read[i], group, onCommandLine, func(flag string) string {
			return excludedBy(exclusive, flag, stronger[i])
		}, anyVerb)
		skipped = append(skipped, s...)
		if err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// choice is one flag of a group of mutually exclusive flags, with the flags that go
// only with it (the verb refuses them with another choice of the group).
type choice struct {
	flag string
	with []string
}

// exclusiveGroups are the verb's groups of flags of which one may be given (each
// group's flags choose the same thing in different ways). The verb refuses two of one
// group, or a flag that goes only with another choice; a flag on the command line must
// therefore keep an option file's other choice of its group, and what goes only with
// that choice, from being set, or a file meant for another run would refuse this one.
func exclusiveGroups(verb string) [][]choice {
	switch verb {
	case "backup":
		encoded := []string{"compress", "compress-level", "encrypt-to", "encrypt-to-file"}
		return [][]choice{
			{{"target-dir", []string{"incremental-basedir", "incremental-lsn"}},
				{"stream", append([]string{"incremental-basedir", "incremental-lsn"}, encoded...)},
				{"repo", append([]string{"incremental", "base", "part-size", "uploads"}, encoded...)}},
			{{"incremental-basedir", nil}, {"incremental-lsn", nil}, {"incremental", nil}, {"base", nil}},
			{{"max-impact", nil}, {"max-rate", nil}},
		}
	case "restore":
		return [][]choice{
			{{"target-dir", []string{"move", "incremental-dir"}},
				{"from", []string{"identity-file"}},
				{"repo", []string{"resume", "identity-file", "to-gtid", "to-time"}}},
			{{"to-gtid", nil}, {"to-time", nil}},
			{{"no-data-directory", nil}, {"data-directory-map", nil}},
			{{"datadir", nil}, {"into-server", nil}},
		}
	}
	return nil
}

// excludedBy names the flag of set that excludes flag: another choice of a group whose
// choices flag is one of, or goes with, when flag does not go with it; or "".
func excludedBy(groups [][]choice, flag string, set map[string]bool) string {
	for _, g := range groups {
		inGroup := slices.ContainsFunc(g, func(c choice) bool { return c.flag == flag || slices.Contains(c.with, flag) })
		if !inGroup {
			continue
		}
		for _, c := range g {
			if set[c.flag] && c.flag != flag && !slices.Contains(c.with, flag) {
				return c.flag
			}
		}
	}
	return ""
}

// readGroup reads one group through my_print_defaults, or, where it is missing, from
// the --defaults-file alone (without following !include).
func readGroup(ctx context.Context, src optfile.Sources, group string) (optfile.Options, error) {
	if _, err := exec.LookPath("my_print_defaults"); err != nil {
		return optfile.Read(src.DefaultsFile, group)
	}
	return optfile.ReadGroups(ctx, src, group)
}

// setFlags sets from opts the flags the command line did not set, but those excluded
// names a stronger flag of their exclusive group for (returned as said); an option that
// names no flag is refused in a verb's own group.
func setFlags(fs *pflag.FlagSet, opts optfile.Options, group string, onCommandLine map[string]bool, excluded func(string) string, anyVerb map[string]bool) ([]string, error) {
	strict := group != "ferry"
	byName := map[string]*pflag.Flag{}
	fs.VisitAll(func(f *pflag.Flag) { byName[optfile.Name(f.Name)] = f })
	var errs []error
	var skipped, bySeries []string
	for name, val := range opts {
		f, ok := byName[name]
		if m := mariadbdSeries.FindStringSubmatch(name); m != nil {
			if byName["mariadbd"] != nil && !onCommandLine["mariadbd"] {
				bySeries = append(bySeries, m[1]+"="+val) // the mariadbd for backups of that series
			}
			continue
		}
		switch {
		case !ok && strict:
			errs = append(errs, fmt.Errorf("option %q in [%s] of the option files: ferry %s has no --%s; remove it or move it to [ferry]",
				name, group, strings.TrimPrefix(group, "ferry-"), strings.ReplaceAll(name, "_", "-")))
			continue
		case !ok && !anyVerb[name]:
			errs = append(errs, fmt.Errorf("unknown option %q in [%s] of the option files: no verb of ferry has --%s; correct its name or remove it",
				name, group, strings.ReplaceAll(name, "_", "-")))
			continue
		case !ok || onCommandLine[f.Name] || f.Name == "defaults-file" || f.Name == "help":
			continue
		}
		if by := excluded(f.Name); by != "" {
			skipped = append(skipped, fmt.Sprintf("option %s in [%s] of the option files not applied: --%s is given, which it does not go with", name, group, by))
			continue
		}
		if val == "" && f.Value.Type() == "bool" {
			val = "true" // a bare option in an option file turns a switch on
		}
		if o, ok := f.Value.(interface{ forget() }); ok {
			o.forget() // a weaker group's value: this one replaces it
		}
		if err := fs.Set(f.Name, val); err != nil {
			errs = append(errs, fmt.Errorf("option %s=%s in [%s] of the option files: %v", name, val, group, err))
		}
	}
	sort.Strings(skipped)
	if len(bySeries) > 0 {
		sort.Strings(bySeries)
		if cur := fs.Lookup("mariadbd").Value.String(); cur != "" {
			bySeries = append([]string{cur}, bySeries...)
		}
		if err := fs.Set("mariadbd", strings.Join(bySeries, ",")); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return skipped, usageError{errors.Join(errs...)}
	}
	return skipped, nil
}

// mariadbdSeries is an option file's mariadbd-SERIES= (mariadbd-11.4=/opt/...): the
// mariadbd a restore, prepare or clone runs for a backup or donor of that series.
var mariadbdSeries = regexp.MustCompile(`^mariadbd[-_](\d+\.\d+)$`)

// verbOptions is every option name (as option files spell it) of every verb under root,
// for telling a typo in [ferry] from an option of another verb.
func verbOptions(root *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[optfile.Name(f.Name)] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[optfile.Name(f.Name)] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return names
}
