package main

import (
	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/restore"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newPrepareCmd(g *globals) *cobra.Command {
	var cfg restore.PrepareConfig
	cmd := &cobra.Command{
		Use:   "prepare --target-dir DIR",
		Short: "Run crash recovery on a backup with the stock mariadbd, making it a clean datadir",
		Example: `  ferry prepare --target-dir /backups/full-1
  Works on ferry and mariadb-backup backups; running it twice is harmless.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Log = g.log
			limitRecoveryMemory(cfg.UseMemory, 0)
			if err := restore.Prepare(cmd.Context(), cfg); err != nil {
				return err
			}
			g.log.Info("prepare completed OK", "dir", cfg.Dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "target-dir", "", "backup directory to prepare (required)")
	f.StringVar(&cfg.Mariadbd, "mariadbd", "", mariadbdHelp)
	f.StringVar(&cfg.UseMemory, "use-memory", "256M", "memory for recovery: ferry's redo apply batch, or the stock server's buffer pool")
	addRecoveryFlag(f, &cfg.Recovery)
	addKeyFlags(f, &cfg.Keys)
	cmd.MarkFlagRequired("target-dir")
	return cmd
}

// addRecoveryFlag adds --recovery, how the copy's redo is applied.
func addRecoveryFlag(f *pflag.FlagSet, r *restore.Recovery) {
	f.Var((*recoveryValue)(r), "recovery", "how the redo is applied: auto (ferry applies it, or the stock server's recovery when ferry cannot), native (ferry only, an error instead), server (the stock server's crash recovery)")
}

// recoveryValue is a restore.Recovery as a flag value.
type recoveryValue restore.Recovery

// String returns the mode's name.
func (v *recoveryValue) String() string {
	if *v == "" {
		return "auto"
	}
	return string(*v)
}

// Set parses a mode.
func (v *recoveryValue) Set(s string) error {
	r, err := restore.ParseRecovery(s)
	*v = recoveryValue(r)
	return err
}

// Type names the value in help.
func (v *recoveryValue) Type() string { return "mode" }

// addKeyFlags adds the flags that name this host's key files for a backup whose
// server encrypted data at rest (file_key_management).
func addKeyFlags(f *pflag.FlagSet, k *keyfile.Files) {
	f.StringVar(&k.KeyFile, "key-file", "", "the source's file_key_management key file, at its path on this host (for a backup of a server that encrypts data at rest)")
	f.StringVar(&k.PasswordFile, "key-password-file", "", "file holding the password the key file is encrypted with (file_key_management_filekey)")
}
