package restore

import "github.com/ferry-backup/ferry/internal/setting"

// cliText is err as the command line prints it, for the tests that check a refusal
// names the flag to give: restore names settings, cmd/ferry spells them as flags.
func cliText(err error) string {
	return setting.Render(err, setting.Names{
		setting.Mariadbd:  "--mariadbd",
		setting.Owner:     "--owner",
		setting.Replace:   "--replace",
		setting.Resume:    "--resume",
		setting.UseMemory: "--use-memory",
	})
}
