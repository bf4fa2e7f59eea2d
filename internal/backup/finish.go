package backup

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// finish writes the mariabackup-compatible metadata, syncs everything, and writes the
// manifest last; only then is the incomplete marker removed.
func (j *job) finish(res *Result) error {
	m := &j.m
	m.Format, m.Tool, m.ToolVersion = manifest.FormatVersion, "ferry", j.cfg.Version
	m.ID, m.Type, m.Engine = newID(), "full", "innodb-redo-copy/1"
	m.EndTime = time.Now()
	m.Server = manifest.Server{Version: j.info.Version, Series: j.info.Series(), Datadir: j.info.Datadir, Settings: j.prepareSettings()}
	dir := j.cfg.TargetDir
	steps := []func() error{
		func() error { return xtrabackup.WriteMyCnf(dir, m.Server.Settings) },
		func() error { return j.writeBinlogInfo() },
		func() error { return xtrabackup.WriteInfo(dir, j.infoEntries(res)) },
		func() error {
			return xtrabackup.WriteCheckpoints(dir, xtrabackup.Checkpoints{BackupType: xtrabackup.TypeFull, ToLSN: m.EndLSN, LastLSN: m.LastLSN})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return filecopy.WrapWriteErr(err)
		}
	}
	files, err := j.manifestFiles()
	if err != nil {
		return err
	}
	m.Files = files
	if err := filecopy.SyncFS(dir); err != nil {
		return err
	}
	if err := manifest.Write(dir, m); err != nil {
		return filecopy.WrapWriteErr(err)
	}
	if err := os.Remove(filepath.Join(dir, manifest.IncompleteMarker)); err != nil {
		return fmt.Errorf("remove incomplete marker: %w", err)
	}
	return manifest.SyncDir(dir)
}

// prepareSettings are the server settings prepare must reproduce (backup-my.cnf).
func (j *job) prepareSettings() map[string]string {
	s := map[string]string{}
	for _, k := range xtrabackup.MyCnfKeys {
		if v, ok := j.info.Vars[k]; ok && v != "" {
			s[k] = v
		}
	}
	s["innodb_undo_directory"] = "./"
	if v := j.info.Vars["lower_case_table_names"]; v != "" {
		s["lower_case_table_names"] = v
	}
	return s
}

func (j *job) writeBinlogInfo() error {
	c := j.m.Coordinates
	if c.BinlogFile == "" {
		return nil
	}
	return xtrabackup.WriteBinlogInfo(j.cfg.TargetDir, c.BinlogFile, c.BinlogPos, c.GTIDBinlogPos)
}

func (j *job) infoEntries(res *Result) []xtrabackup.InfoEntry {
	m, c := &j.m, j.m.Coordinates
	binlog := fmt.Sprintf("filename '%s', position '%d', GTID of the last change '%s'", c.BinlogFile, c.BinlogPos, c.GTIDBinlogPos)
	return []xtrabackup.InfoEntry{
		{Key: "uuid", Value: m.ID},
		{Key: "tool_name", Value: "ferry"},
		{Key: "tool_command", Value: j.cfg.Command},
		{Key: "tool_version", Value: j.cfg.Version},
		{Key: "ibbackup_version", Value: j.cfg.Version},
		{Key: "server_version", Value: j.info.Version},
		{Key: "start_time", Value: m.StartTime.Format("2006-01-02 15:04:05")},
		{Key: "end_time", Value: m.EndTime.Format("2006-01-02 15:04:05")},
		{Key: "lock_time", Value: fmt.Sprintf("%d", int(res.BlockCommit.Seconds()))},
		{Key: "binlog_pos", Value: binlog},
		{Key: "gtid_binlog_pos", Value: c.GTIDBinlogPos},
		{Key: "gtid_current_pos", Value: c.GTIDCurrentPos},
		{Key: "gtid_slave_pos", Value: c.GTIDSlavePos},
		{Key: "innodb_from_lsn", Value: fmt.Sprintf("%d", m.StartLSN)},
		{Key: "innodb_to_lsn", Value: fmt.Sprintf("%d", m.EndLSN)},
		{Key: "partial", Value: "N"},
		{Key: "incremental", Value: "N"},
		{Key: "format", Value: "file"},
		{Key: "compressed", Value: "N"},
	}
}

// manifestFiles lists every stored file: copies with the checksum taken while copying,
// metadata files checksummed now.
func (j *job) manifestFiles() ([]manifest.File, error) {
	var out []manifest.File
	for _, f := range j.files {
		out = append(out, manifest.File{Path: f.Rel, Size: f.Size, CRC32C: checksum.Hex(f.CRC), Kind: f.Kind, Sparse: f.Sparse})
	}
	for _, name := range []string{xtrabackup.MyCnfFile, xtrabackup.BinlogInfoFile, xtrabackup.InfoFile, xtrabackup.CheckpointsFile} {
		size, crc, err := filecopy.FileCRC(filepath.Join(j.cfg.TargetDir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, manifest.File{Path: name, Size: size, CRC32C: checksum.Hex(crc), Kind: manifest.KindMeta})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	return out, nil
}

// newID returns a backup id: UTC time plus random suffix, sortable.
func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strings.ToLower(time.Now().UTC().Format("20060102T150405Z")) + fmt.Sprintf("-%x", b)
}
