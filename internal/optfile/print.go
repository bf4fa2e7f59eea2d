package optfile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Sources are the option files a MariaDB program reads, as its --defaults-file,
// --defaults-extra-file and --defaults-group-suffix say (all empty: the system's
// default files).
type Sources struct {
	DefaultsFile      string
	DefaultsExtraFile string
	GroupSuffix       string
}

// maxPrinted bounds what my_print_defaults may print.
const maxPrinted = 1 << 20

// ReadGroups reads groups (and, with a group suffix, each group with it appended, as
// mariadbd does) from the files src names, through the stock my_print_defaults, which
// follows !include and !includedir as the server does (Read reads one file). A later
// value wins.
func ReadGroups(ctx context.Context, src Sources, groups ...string) (Options, error) {
	return printDefaults(ctx, src, groups...)
}

// ReadServerGroups reads the groups mariadbd itself reads ([mysqld], [server],
// [mariadbd], [mariadb] and their versioned and suffixed forms) from the files src names.
func ReadServerGroups(ctx context.Context, src Sources) (Options, error) {
	return printDefaults(ctx, src, "--mysqld")
}

// printDefaults runs my_print_defaults for groups (or its --mysqld option).
func printDefaults(ctx context.Context, src Sources, groups ...string) (Options, error) {
	bin, err := exec.LookPath("my_print_defaults")
	if err != nil {
		return nil, errors.New("my_print_defaults not found on PATH: it comes with MariaDB's client (mariadb-client-core)")
	}
	var args []string
	if src.DefaultsFile != "" {
		args = append(args, "--defaults-file="+src.DefaultsFile)
	}
	if src.DefaultsExtraFile != "" {
		args = append(args, "--defaults-extra-file="+src.DefaultsExtraFile)
	}
	if src.GroupSuffix != "" {
		args = append(args, "--defaults-group-suffix="+src.GroupSuffix)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, groups...)...)
	cmd.Stdout, cmd.Stderr = &limited{w: &out, n: maxPrinted}, &limited{w: &stderr, n: 4096}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("read option groups %s with my_print_defaults %s: %v %s", strings.Join(groups, ","), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	o := Options{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "--")
		name, val, _ := strings.Cut(line, "=")
		if name != "" {
			o[Name(name)] = val
		}
	}
	return o, nil
}

// limited is a writer that keeps at most n bytes.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
