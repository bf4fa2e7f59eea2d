package mysql

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ferry-backup/ferry/internal/setting"
)

var mysqldVerRe = regexp.MustCompile(`Ver (\d+\.\d+\.\d+)`)

// MysqldVersion runs `mysqld --version` and returns e.g. "8.0.31"; a MariaDB server is
// refused.
func MysqldVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "--no-defaults", "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	m := mysqldVerRe.FindSubmatch(out)
	if m == nil || strings.Contains(string(out), "MariaDB") {
		return "", fmt.Errorf("%s is not a MySQL server (%s)", bin, strings.TrimSpace(string(out)))
	}
	return string(m[1]), nil
}

// seriesKey is the SERIES of a SERIES=PATH entry.
var seriesKey = regexp.MustCompile(`^\d+\.\d+$`)

// FindMysqld returns the mysqld that recovers a backup of series ("8.0"). spec is what
// the user gave (the --mariadbd flag or the option file's mariadbd-SERIES= entries): a
// binary or an installation directory is used as it is; otherwise the SERIES entry,
// then mysqld on PATH, in /usr/sbin, /usr/local/mysql/bin, /opt/mysql-SERIES/bin and
// /usr/local/mysql-SERIES/bin, the first of series wins, else the first MySQL found
// (the caller refuses it, naming it).
func FindMysqld(ctx context.Context, spec, series string) (string, error) {
	var cands []string
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if k, path, ok := strings.Cut(part, "="); ok && seriesKey.MatchString(k) {
			if k == series {
				cands = append(cands, path)
			}
			continue
		}
		if part != "" {
			return explicit(part)
		}
	}
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/local/mysql/bin") {
		if dir != "" {
			cands = append(cands, filepath.Join(dir, "mysqld"))
		}
	}
	cands = append(cands, filepath.Join("/opt/mysql-"+series, "bin", "mysqld"), filepath.Join("/usr/local/mysql-"+series, "bin", "mysqld"))
	first := ""
	for _, c := range cands {
		if fi, err := os.Stat(c); err != nil || fi.IsDir() {
			continue
		}
		v, err := MysqldVersion(ctx, c)
		if err != nil {
			continue // MariaDB's mysqld link, or not a server
		}
		if strings.HasPrefix(v, series+".") {
			return c, nil
		}
		if first == "" {
			first = c
		}
	}
	if first == "" {
		return "", setting.Errorf("no MySQL %s mysqld found on PATH, in /usr/sbin or /opt/mysql-%s: install the backup's MySQL version or pass %s", series, series, setting.Mariadbd)
	}
	return first, nil
}

// explicit is the binary path names: itself, or an installation directory's
// bin/mysqld or sbin/mysqld.
func explicit(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", setting.Errorf("%s %s: %w", setting.Mariadbd, path, err)
	}
	if !fi.IsDir() {
		return path, nil
	}
	for _, rel := range []string{"bin/mysqld", "sbin/mysqld"} {
		p := filepath.Join(path, rel)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", setting.Errorf("%s %s: a directory without bin/mysqld", setting.Mariadbd, path)
}

// Basedir is the installation directory of bin (its bin/ or sbin/ parent) when it
// holds share/english/errmsg.sys, which mysqld must find: "" for a system install whose
// compiled-in paths are right.
func Basedir(bin string) string {
	dir := filepath.Dir(filepath.Dir(bin))
	if _, err := os.Stat(filepath.Join(dir, "share", "english", "errmsg.sys")); err == nil {
		return dir
	}
	return ""
}
