package backup

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/checksum"
	"github.com/ferry-backup/ferry/internal/filecopy"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/xtrabackup"
)

// finish writes the mariabackup-compatible metadata, then the manifest last: only a
// backup with a manifest is ever prepared or restored.
func (j *job) finish(ctx context.Context, res *Result) error {
	m := &j.m
	m.Format, m.Tool, m.ToolVersion = manifest.FormatVersion, "ferry", j.cfg.Version
	m.Engine = "innodb-redo-copy/1"
	cp := xtrabackup.Checkpoints{LastLSN: m.LastLSN}
	if err := j.mode.record(j, m, &cp); err != nil { // Type, ToLSN, Incremental
		return err
	}
	m.EndTime = j.clock.Now()
	m.Server = manifest.Server{Family: j.info.Family, Version: j.info.Version, Series: j.info.Series(), Datadir: j.info.Datadir, UID: j.info.Vars["server_uid"], Settings: j.prepareSettings()}
	m.Server.Host, m.Server.Port = j.info.ReplicaAddress()
	m.Storage = j.sink.Caps().Storage
	if j.cfg.Filter != nil {
		m.Partial = j.cfg.Filter.Spec()
	}
	meta := []struct {
		name string
		data []byte
	}{
		{xtrabackup.MyCnfFile, xtrabackup.MyCnfBytes(m.Server.Settings)},
		{xtrabackup.BinlogInfoFile, j.binlogInfo()},
		{xtrabackup.GaleraInfoFile, j.galeraInfo()},
		{xtrabackup.SlaveInfoFile, mariadb.SlaveInfo(m.Coordinates)},
		{xtrabackup.InfoFile, xtrabackup.InfoBytes(j.infoEntries(res))},
		{xtrabackup.CheckpointsFile, cp.Bytes()},
	}
	m.Files = j.manifestFiles()
	for _, f := range meta {
		if f.data == nil {
			continue
		}
		mf, err := j.writeWhole(f.name, f.data, manifest.KindMeta)
		if err != nil {
			return filecopy.WrapWriteErr(err)
		}
		m.Files = append(m.Files, mf)
	}
	sort.Slice(m.Files, func(a, b int) bool { return m.Files[a].Path < m.Files[b].Path })
	if err := ctx.Err(); err != nil { // interrupted after the locks: still no backup
		return err
	}
	return j.sink.Commit(ctx, m)
}

// prepareSettings are the server settings prepare must reproduce (backup-my.cnf).
func (j *job) prepareSettings() map[string]string {
	s := map[string]string{}
	for _, k := range j.layout().settings() {
		if v, ok := j.info.Vars[k]; ok && v != "" {
			s[k] = v
		}
	}
	s["innodb_undo_directory"] = "./"
	if v := j.info.Vars["lower_case_table_names"]; v != "" {
		s["lower_case_table_names"] = v
	}
	// Encryption at rest: the key plugin and where the source kept its keys, so that
	// restore asks for them; never a key or the key file's password.
	if j.info.KeyPlugin == mariadb.FileKeyManagement {
		s["plugin_load"] = mariadb.FileKeyManagement + "=" + mariadb.FileKeyManagement // mariadb-backup --prepare reads this form
		s["file_key_management_filename"] = j.info.Vars["file_key_management_filename"]
		s["file_key_management_encryption_algorithm"] = j.info.Vars["file_key_management_encryption_algorithm"]
		s["plugin_dir"] = j.info.Vars["plugin_dir"] // mariadb-backup --prepare loads the plugin from it
	}
	return s
}

// binlogInfo is xtrabackup_binlog_info, nil without a binary log.
func (j *job) binlogInfo() []byte {
	c := j.m.Coordinates
	if c.BinlogFile == "" {
		return nil
	}
	return xtrabackup.BinlogInfoBytes(c.BinlogFile, c.BinlogPos, c.GTIDBinlogPos)
}

// galeraInfo is xtrabackup_galera_info ("uuid:seqno domain", as mariadb-backup
// --galera-info writes it), nil unless the server is a Galera node.
func (j *job) galeraInfo() []byte {
	if g := j.m.Coordinates.Galera; g != nil {
		return []byte(g.Line() + "\n")
	}
	return nil
}

func (j *job) infoEntries(res *Result) []xtrabackup.InfoEntry {
	m, c := &j.m, j.m.Coordinates
	from, incremental := j.mode.infoFrom(m)
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
		{Key: "innodb_from_lsn", Value: fmt.Sprintf("%d", from)},
		{Key: "innodb_to_lsn", Value: fmt.Sprintf("%d", m.ToLSN)},
		{Key: "partial", Value: yesNo(m.Partial != nil)},
		{Key: "incremental", Value: incremental},
		{Key: "format", Value: j.infoFormat()},
		{Key: "compressed", Value: cmp.Or(j.sink.Caps().Storage.Compression, "N")},
	}
}

func yesNo(b bool) string {
	if b {
		return "Y"
	}
	return "N"
}

// infoFormat is xtrabackup_info's format: mariadb-backup says "file" for a directory.
func (j *job) infoFormat() string {
	if f := j.sink.Caps().Storage.Format; f != manifest.StorageDir {
		return string(f)
	}
	return "file"
}

// manifestFiles lists every copied file with the checksum taken while copying.
func (j *job) manifestFiles() []manifest.File {
	var out []manifest.File
	for name, f := range j.files {
		out = append(out, manifest.File{Path: name, Size: f.Size, CRC32C: checksum.Hex(f.CRC), Kind: f.Kind, Sparse: f.Sparse, Space: f.Space, Remote: f.Remote})
	}
	return out
}

// newID returns a backup id: the UTC time now plus a random suffix, sortable.
func newID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strings.ToLower(now.UTC().Format("20060102T150405Z")) + fmt.Sprintf("-%x", b)
}
