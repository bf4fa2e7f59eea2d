package sst

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/optfile"
)

// server is what the method needs of its mariadbd's settings: its option files'
// server groups, overridden by its command line (--mysqld-args).
type server struct {
	datadir string
	opts    optfile.Options
}

// loadServer reads the settings of the mariadbd that runs the method.
func loadServer(ctx context.Context, a Args) (server, error) {
	o, err := optfile.ReadServerGroups(ctx, optfile.Sources{DefaultsFile: a.DefaultsFile, DefaultsExtraFile: a.DefaultsExtraFile,
		GroupSuffix: a.DefaultsGroupSuffix})
	if err != nil {
		return server{}, err
	}
	for _, w := range a.Mysqld {
		if !strings.HasPrefix(w, "--") {
			continue
		}
		n, v, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		o[optfile.Name(n)] = v
	}
	s := server{opts: o, datadir: a.Datadir}
	if s.datadir == "" {
		s.datadir = o["datadir"]
	}
	if s.datadir, err = filepath.Abs(filepath.Clean(s.datadir)); err != nil {
		return s, fmt.Errorf("datadir %q: %w", s.datadir, err)
	}
	return s, nil
}

// path is a setting naming a file or directory, made absolute against the datadir as
// mariadbd does; "" if unset.
func (s server) path(name string) string {
	v := s.opts[name]
	if v == "" {
		return ""
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(s.datadir, v)
	}
	return filepath.Clean(v)
}

// checkLayout refuses a joiner whose InnoDB or Aria files live outside its datadir:
// the copy is built and swapped inside the datadir.
func (s server) checkLayout() error {
	for _, name := range []string{"innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory", "aria_log_dir_path"} {
		if p := s.path(name); p != "" && p != s.datadir {
			return fmt.Errorf("%s=%s is outside the datadir %s: ferry's SST builds every InnoDB and Aria file in the datadir; set %s to the datadir (or leave it unset) on this node, or use another SST method", name, s.opts[name], s.datadir, name)
		}
	}
	return nil
}

// local tells which entries of the joiner's datadir are the node's own and stay when
// the copy is swapped in: Galera's saved state, view and gcache, certificates, the
// server's error, general and slow logs, pid file and socket. Everything else (the old
// data, binary logs, ddl_recovery.log) moves aside with the old datadir.
func (s server) local() func(name string) bool {
	own := map[string]bool{"grastate.dat": true, "gvwstate.dat": true, "galera.cache": true, "sst_in_progress": true, "wsrep_sst.pid": true}
	for _, k := range []string{"log_error", "general_log_file", "slow_query_log_file", "pid_file", "socket"} {
		if p := s.path(k); p != "" && filepath.Dir(p) == s.datadir {
			own[filepath.Base(p)] = true
		}
	}
	return func(name string) bool {
		if own[name] || strings.HasPrefix(name, "gcache.page.") {
			return true
		}
		for _, suffix := range []string{".pem", ".err", ".pid", ".sock", ".sock.lock"} {
			if strings.HasSuffix(name, suffix) {
				return true
			}
		}
		return false
	}
}

// binlogAside moves the joiner's binary logs and their index out of the way when they
// live outside the datadir (inside it they moved aside with the old datadir): the node
// starts a new binary log from the copy, as after mariabackup's SST. They go into a
// directory beside them, kept.
func (s server) binlogAside(stamp string) (string, error) {
	base, ok := s.opts["log_bin"]
	if !ok {
		return "", nil
	}
	if base == "" || base == "1" || strings.EqualFold(base, "on") {
		base = s.opts["log_basename"]
	}
	if base == "" {
		return "", nil
	}
	if !filepath.IsAbs(base) {
		base = filepath.Join(s.datadir, base)
	}
	dir := filepath.Dir(filepath.Clean(base))
	if dir == s.datadir {
		return "", nil
	}
	prefix := filepath.Base(base) + "."
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil // no binary log directory yet: nothing to move
	}
	aside := filepath.Join(dir, "ferry-old-binlogs-"+stamp)
	moved := false
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if !moved {
			if err := os.Mkdir(aside, 0o700); err != nil {
				return "", fmt.Errorf("make %s: %w", aside, err)
			}
			moved = true
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return "", fmt.Errorf("move the old binary log %s aside: %w", e.Name(), err)
		}
	}
	if !moved {
		return "", nil
	}
	return aside, nil
}

// recoveryMemory is the buffer pool of the copy's recovery: [sst] use-memory, else the
// joiner's own innodb_buffer_pool_size, as mariabackup's SST does (the joiner's InnoDB
// has not started yet, so that memory is free; a larger pool replays the redo in fewer
// batches), else 256M.
func (s server) recoveryMemory(useMemory string) string {
	if useMemory != "" {
		return useMemory
	}
	if v := s.opts["innodb_buffer_pool_size"]; v != "" {
		if n, err := optfile.ParseSize(v); err == nil && n >= 256<<20 {
			return strconv.FormatInt(n, 10)
		}
	}
	return "256M"
}
