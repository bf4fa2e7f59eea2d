package main

import "github.com/ferry-backup/ferry/internal/setting"

// flagNames spells the settings internal/ errors name as the flags that set them.
func flagNames() setting.Names {
	return setting.Names{
		setting.Compress:               "--compress",
		setting.CompressLevel:          "--compress-level",
		setting.Datadir:                "--datadir",
		setting.DefaultsFile:           "--defaults-file",
		setting.EncryptTo:              "--encrypt-to",
		setting.EncryptToFile:          "--encrypt-to-file",
		setting.FlushInterval:          "--flush-interval",
		setting.From:                   "--from",
		setting.Heartbeat:              "--heartbeat",
		setting.Host:                   "--host",
		setting.IdentityFile:           "--identity-file",
		setting.IncrementalBasedir:     "--incremental-basedir",
		setting.KeepDays:               "--keep-days",
		setting.KeepLast:               "--keep-last",
		setting.Mariadbd:               "--mariadbd",
		setting.MaxMemory:              "--max-memory",
		setting.MaxRate:                "--max-rate",
		setting.MaxSpool:               "--max-spool",
		setting.MergeEvery:             "--merge-every",
		setting.MergeSize:              "--merge-size",
		setting.MetricsFile:            "--metrics-file",
		setting.MetricsListen:          "--metrics-listen",
		setting.Parallel:               "--parallel",
		setting.PartSize:               "--part-size",
		setting.PasswordFile:           "--password-file",
		setting.Port:                   "--port",
		setting.RenameTo:               "--rename-to",
		setting.ReplaceTables:          "--replace-tables",
		setting.ReplPasswordFile:       "--repl-password-file",
		setting.ReplUser:               "--repl-user",
		setting.Replicate:              "--replicate",
		setting.Repo:                   "--repo",
		setting.Resume:                 "--resume",
		setting.RetryMax:               "--retry-max",
		setting.S3CAFile:               "--s3-ca-file",
		setting.S3Endpoint:             "--s3-endpoint",
		setting.S3PathStyle:            "--s3-path-style",
		setting.S3Region:               "--s3-region",
		setting.SafeSlaveBackup:        "--safe-slave-backup",
		setting.SafeSlaveBackupTimeout: "--safe-slave-backup-timeout",
		setting.SegmentSize:            "--segment-size",
		setting.SlaveInfo:              "--slave-info",
		setting.Socket:                 "--socket",
		setting.Start:                  "--start",
		setting.Tables:                 "--tables",
		setting.TargetDir:              "--target-dir",
		setting.TLSCA:                  "--tls-ca",
		setting.TLSCert:                "--tls-cert",
		setting.TLSKey:                 "--tls-key",
		setting.TLSServerName:          "--tls-server-name",
		setting.Tmpdir:                 "--tmpdir",
		setting.TokenFile:              "--token-file",
		setting.ToGTID:                 "--to-gtid",
		setting.ToTime:                 "--to-time",
		setting.User:                   "--user",
	}
}

// flagText is err's text as the command line says it: each setting an internal/ error
// names is spelled as its flag (TLS certificate: --tls-cert).
func flagText(err error) string { return setting.Render(err, flagNames()) }
