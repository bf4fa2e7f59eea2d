package main

import (
	"fmt"
	"os"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/spf13/cobra"
)

func newKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --output KEYFILE",
		Short: "Create an age identity (secret key file) for encrypted backups and print its public key",
		Example: `  ferry keygen --output /root/ferry-key.txt          # prints age1...: give it to ferry backup --encrypt-to
  ferry restore --from backup.xbs --identity-file /root/ferry-key.txt --datadir /var/lib/mysql-new`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErr("--output is required: the secret key is never printed")
			}
			secret, public, err := codec.NewIdentity()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return fmt.Errorf("create key file (it is never overwritten): %w", err)
			}
			if _, err := fmt.Fprintf(f, "# public key: %s\n%s\n", public, secret); err != nil {
				f.Close()
				return fmt.Errorf("write %s: %w", out, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), public)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "output", "", "new file for the secret key (mode 0600; never overwritten)")
	return cmd
}
