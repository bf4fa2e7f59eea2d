package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newGenDocsCmd is the hidden verb the package build runs: man pages for ferry and
// each verb, from the commands' own help, and the shell completions.
func newGenDocsCmd() *cobra.Command {
	var man, completions string
	cmd := &cobra.Command{
		Use:    "gen-docs --man DIR --completions DIR",
		Short:  "Write ferry's man pages (ferry.1, ferry-VERB.1) and bash and zsh completions, for packages",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root := cmd.Root()
			if man != "" {
				if err := os.MkdirAll(man, 0o755); err != nil {
					return err
				}
				hdr := &doc.GenManHeader{Title: "FERRY", Section: "1", Source: "ferry " + version, Manual: "ferry manual"}
				if err := doc.GenManTree(root, hdr, man); err != nil {
					return fmt.Errorf("man pages: %w", err)
				}
			}
			if completions != "" {
				if err := os.MkdirAll(completions, 0o755); err != nil {
					return err
				}
				if err := root.GenBashCompletionFileV2(filepath.Join(completions, "ferry.bash"), true); err != nil {
					return fmt.Errorf("bash completion: %w", err)
				}
				if err := root.GenZshCompletionFile(filepath.Join(completions, "_ferry")); err != nil {
					return fmt.Errorf("zsh completion: %w", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&man, "man", "", "directory for the man pages")
	cmd.Flags().StringVar(&completions, "completions", "", "directory for the completions (ferry.bash, _ferry)")
	return cmd
}
