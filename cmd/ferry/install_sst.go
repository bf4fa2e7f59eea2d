package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// shimMarker is the line that marks a wsrep_sst_ferry ferry wrote.
const shimMarker = "# wsrep_sst_ferry: written by ferry install-sst"

func newInstallSSTCmd() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "install-sst [--dir /usr/bin]",
		Short: "Install wsrep_sst_ferry, the shim through which mariadbd runs ferry as its SST method",
		Example: `  ferry install-sst                 # /usr/bin/wsrep_sst_ferry, on every node of the cluster
  then in my.cnf: [mysqld] wsrep_sst_method=ferry  wsrep_sst_auth=sst:secret
  mariadbd puts its own bin directory (/usr/bin for Debian's packages) first on the
  PATH of its SST methods, so the shim goes there by default. It runs this ferry
  binary (its absolute path, resolved now): reinstall after moving ferry.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err == nil {
				self, err = filepath.EvalSymlinks(self)
			}
			if err != nil {
				return fmt.Errorf("find this ferry binary: %w", err)
			}
			path := filepath.Join(dir, "wsrep_sst_ferry")
			if err := writeShim(path, self, force); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Installed %s (runs %s sst). Set wsrep_sst_method=ferry and wsrep_sst_auth on every node.\n", path, self)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "/usr/bin", "directory to install wsrep_sst_ferry in (mariadbd's bin directory, or one on its PATH)")
	cmd.Flags().BoolVar(&force, "force", false, "replace a wsrep_sst_ferry that ferry did not write")
	return cmd
}

// writeShim writes the shell shim atomically; a file that is not ferry's is kept
// unless force is set.
func writeShim(path, ferry string, force bool) error {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && !bytes.Contains(old, []byte(shimMarker)) && !force:
		return usagef("%s exists and was not written by ferry: move it away or pass --force", path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", path, err)
	}
	body := fmt.Sprintf("#!/bin/sh\n%s\nexec %s sst \"$@\"\n", shimMarker, shellQuote(ferry))
	tmp, err := os.CreateTemp(filepath.Dir(path), ".wsrep_sst_ferry-")
	if err != nil {
		return fmt.Errorf("install the SST shim in %s: %w", filepath.Dir(path), err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	return nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte(`'\''`))) + "'"
}
