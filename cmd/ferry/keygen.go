package main

import (
	"fmt"
	"os"

	"github.com/ferry-backup/ferry/internal/codec"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/spf13/cobra"
)

func newKeygenCmd() *cobra.Command {
	var out string
	var sign bool
	cmd := &cobra.Command{
		Use:   "keygen --output KEYFILE [--signing]",
		Short: "Create an age identity (secret key file) for encrypted backups, or a signing key, and print its public key",
		Example: `  ferry keygen --output /root/ferry-key.txt          # prints age1...: give it to ferry backup --encrypt-to
  ferry restore --from backup.xbs --identity-file /root/ferry-key.txt --datadir /var/lib/mysql-new
  ferry keygen --signing --output /etc/ferry/sign.key   # prints ferrysign1...: ferry backup --repo R --sign-with /etc/ferry/sign.key
  ferry restore --repo R latest --trust-key ferrysign1... --datadir /var/lib/mysql-new   # refuses what that key did not sign`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErr("--output is required: the secret key is never printed")
			}
			newKey := codec.NewIdentity
			if sign {
				newKey = signing.NewKey
			}
			secret, public, err := newKey()
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
	cmd.Flags().BoolVar(&sign, "signing", false, "make an Ed25519 signing key for backup --sign-with (its public key is what restore and verify --trust-key take) instead of an age identity")
	return cmd
}
