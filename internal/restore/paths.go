package restore

// Paths lists the backup's files by their paths in a datadir ('/' separated): what a
// table restore checks the tables it is asked for against before any data moves.
func (b *Backup) Paths() ([]string, error) {
	var out []string
	if b.Manifest != nil {
		for _, f := range b.Manifest.Files {
			out = append(out, f.Path)
		}
		return out, nil
	}
	files, err := b.datadirFiles()
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out, err
}
