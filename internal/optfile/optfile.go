// Package optfile reads MariaDB option files (my.cnf, backup-my.cnf, a client's
// --defaults-file) as the server and its clients do: groups, bare boolean options,
// '#' comments outside quotes, quoted values, backslash escapes, '-' and '_' alike in
// names, and the "loose-" prefix. The INI structure is gopkg.in/ini.v1's; the value
// rules are MariaDB's (mysys/my_default.c), which differ from INI's on ';' and quotes.
package optfile

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/ini.v1"
)

// MaxSize bounds an option file read from input (a backup's backup-my.cnf).
const MaxSize = 1 << 20

// Options are the options of the groups read, by normalised name (Name). A later
// value of the same option wins, as in MariaDB.
type Options map[string]string

// Name normalises an option name: lower case, '_' for '-', no "loose_" prefix.
func Name(s string) string {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	return strings.TrimPrefix(n, "loose_")
}

// Read reads the given groups (e.g. "mysqld", or "client", "client-mariadb") of the
// option file at path; a missing file is an error.
func Read(path string, groups ...string) (Options, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read option file: %w", err)
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("option file %s is larger than %d KiB: not an option file", path, MaxSize>>10)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read option file: %w", err)
	}
	o, err := Parse(b, groups...)
	if err != nil {
		return nil, fmt.Errorf("option file %s: %w", path, err)
	}
	return o, nil
}

// Parse reads the given groups of an option file's contents. Lines ini cannot read
// (!include directives) are skipped.
func Parse(b []byte, groups ...string) (Options, error) {
	f, err := ini.LoadSources(ini.LoadOptions{
		AllowBooleanKeys: true, SkipUnrecognizableLines: true, Insensitive: true,
		IgnoreInlineComment: true, PreserveSurroundedQuote: true, AllowShadows: true,
	}, b)
	if err != nil {
		return nil, err
	}
	out := Options{}
	for _, s := range f.Sections() {
		if !wanted(s.Name(), groups) {
			continue
		}
		for _, k := range s.Keys() {
			v := k.Value()
			if vals := k.ValueWithShadows(); len(vals) > 0 { // empty for "name="
				v = vals[len(vals)-1]
			}
			out[Name(k.Name())] = Value(v)
		}
	}
	return out, nil
}

func wanted(group string, groups []string) bool {
	for _, g := range groups {
		if strings.EqualFold(g, group) {
			return true
		}
	}
	return false
}

// Value turns a raw option value into what MariaDB uses: a '#' outside quotes starts
// a comment, surrounding white space goes, one pair of surrounding quotes goes, and
// the escapes \b \t \n \r \\ \s (space) \" \' are replaced.
func Value(raw string) string {
	v := strings.TrimSpace(endComment(raw))
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	return unescape(v)
}

// endComment cuts raw at the first '#' outside quotes.
func endComment(raw string) string {
	var quote byte
	escape := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if (c == '\'' || c == '"') && !escape {
			switch quote {
			case 0:
				quote = c
			case c:
				quote = 0
			}
		}
		if quote == 0 && c == '#' {
			return raw[:i]
		}
		escape = quote != 0 && c == '\\' && !escape
	}
	return raw
}

func unescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		i++
		switch v[i] {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 's':
			b.WriteByte(' ')
		case '\\', '"', '\'':
			b.WriteByte(v[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

// ParseSize reads a size as MariaDB options take it: digits with an optional K, M or G
// suffix (powers of 1024), at most 2^62.
func ParseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	mult := int64(1)
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k', 'K':
			mult, v = 1<<10, v[:n-1]
		case 'm', 'M':
			mult, v = 1<<20, v[:n-1]
		case 'g', 'G':
			mult, v = 1<<30, v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (like 512K, 100M or 2G)", v)
	}
	return n * mult, nil
}
