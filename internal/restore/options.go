package restore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/keyfile"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/redo"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Option is one server option a restored datadir needs, as in a [mysqld] group.
type Option struct{ Name, Value string }

// ServerOptions are the options a backup's datadir needs to be opened: recovery runs
// with them, and so must every later start of the restored server. They come from an
// allow-list of InnoDB layout options, each value validated, because a backup's
// settings (its manifest, its backup-my.cnf) are input: an option such as init_file
// or general_log_file would make the prepare server, which runs as root, run SQL or
// write outside the staging directory.
type ServerOptions struct {
	Layout  []Option // sorted by name
	Keys    []Option // the key plugin and this host's key file (encryption at rest)
	Ignored []string // settings the backup carries that are not used, sorted

	keyPlugin, algorithm, sourceKeyFile string
	keyFiles                            keyfile.Files // this host's, once UseKeys took them
}

// layoutRules validate the values of the allowed options: each returns the value to
// use or an error.
var layoutRules = map[string]func(string) (string, error){
	"innodb_page_size":          pageSize,
	"innodb_checksum_algorithm": oneOf("crc32", "strict_crc32", "full_crc32", "strict_full_crc32", "innodb", "strict_innodb", "none", "strict_none"),
	"innodb_data_file_path":     dataFilePath,
	"innodb_undo_tablespaces":   intRange(0, 127),
	"innodb_compression_level":  intRange(0, 9),
	"lower_case_table_names":    intRange(0, 2),
}

// placedOptions name where files go; the files are in the staging directory (and
// then the datadir) whatever the source had, so they are known and not used. The
// encryption switches are the server's own settings, not needed to open the data.
var placedOptions = map[string]bool{
	"innodb_log_file_size": true, "innodb_undo_directory": true, "innodb_data_home_dir": true,
	"innodb_log_group_home_dir": true, "innodb_encrypt_log": true, "innodb_encrypt_tables": true,
	"plugin_dir": true,
}

// serverOptions keeps the allowed layout options of settings, refusing a value that
// is not valid for its option, and lists the rest as ignored.
func serverOptions(settings map[string]string) (ServerOptions, error) {
	var o ServerOptions
	for name, raw := range settings {
		known, err := o.keySetting(name, strings.TrimSpace(raw))
		if err != nil {
			return ServerOptions{}, err
		}
		if known {
			continue
		}
		rule, ok := layoutRules[name]
		if !ok {
			if !placedOptions[name] {
				o.Ignored = append(o.Ignored, name)
			}
			continue
		}
		v, err := rule(strings.TrimSpace(raw))
		if err != nil {
			return ServerOptions{}, fmt.Errorf("the backup sets %s to %q: %w; the backup was tampered with or damaged", name, raw, err)
		}
		o.Layout = append(o.Layout, Option{name, v})
	}
	sort.Slice(o.Layout, func(a, b int) bool { return o.Layout[a].Name < o.Layout[b].Name })
	sort.Strings(o.Ignored)
	return o, nil
}

// keySetting takes the settings of encryption at rest: the key plugin (only
// file_key_management; the server loads no other plugin from a backup), its
// algorithm, and where the source kept its key file (for messages). It says whether
// name was one of them.
func (o *ServerOptions) keySetting(name, v string) (bool, error) {
	switch name {
	case "plugin_load_add", "plugin_load":
		for _, p := range strings.Split(v, ";") {
			lib, file, _ := strings.Cut(p, "=")
			if file == "" {
				file = lib
			}
			if strings.TrimSuffix(strings.TrimSpace(file), ".so") == mariadb.FileKeyManagement {
				o.keyPlugin = mariadb.FileKeyManagement
			} else if p != "" {
				o.Ignored = append(o.Ignored, name+"="+p)
			}
		}
		return true, nil
	case "file_key_management_encryption_algorithm":
		alg, err := oneOf("aes_cbc", "aes_ctr")(v)
		if err != nil {
			return true, fmt.Errorf("the backup sets %s to %q: %w; the backup was tampered with or damaged", name, v, err)
		}
		o.algorithm = alg
		return true, nil
	case "file_key_management_filename":
		o.sourceKeyFile = v
		return true, nil
	}
	return false, nil
}

// UseKeys adds the key plugin options for this host's key files, if the backup's
// server encrypted data at rest; without a key file that is an error naming the
// plugin and the option.
func (o *ServerOptions) UseKeys(k keyfile.Files) error {
	if o.keyPlugin == "" {
		return nil
	}
	if k.KeyFile == "" {
		return setting.Errorf("the backup's server encrypts data at rest with the %s plugin (its key file was %s): pass %s with that key file on this host", o.keyPlugin, o.sourceKeyFile, setting.KeyFile)
	}
	key, err := readableFile(k.KeyFile, setting.KeyFile)
	if err != nil {
		return err
	}
	o.Keys = []Option{{"plugin_load_add", mariadb.FileKeyManagement}, {"file_key_management_filename", key}}
	if o.algorithm != "" {
		o.Keys = append(o.Keys, Option{"file_key_management_encryption_algorithm", o.algorithm})
	}
	if k.PasswordFile != "" {
		pw, err := readableFile(k.PasswordFile, setting.KeyPasswordFile)
		if err != nil {
			return err
		}
		o.Keys = append(o.Keys, Option{"file_key_management_filekey", "FILE:" + pw})
		k.PasswordFile = pw
	}
	k.KeyFile = key
	o.keyFiles = k
	return nil
}

// LogKeys loads the keys that read the backup's encrypted redo log (nil if its server
// did not encrypt data at rest) and the plugin's algorithm. A key file that does not
// load is an error naming the option.
func (o ServerOptions) LogKeys() (redo.KeyFunc, string, error) {
	if o.keyPlugin == "" {
		return nil, "", nil
	}
	k, err := o.keyFiles.Load()
	if err != nil {
		return nil, "", setting.Errorf("%s: %w", setting.KeyFile, err)
	}
	return k.Key, o.algorithm, nil
}

// Encrypted says whether the backup's server encrypted data at rest.
func (o ServerOptions) Encrypted() bool { return o.keyPlugin != "" }

// readableFile returns the absolute path of a regular file the user named.
func readableFile(path string, s setting.Setting) (string, error) {
	abs, err := filepath.Abs(path)
	if err == nil {
		var f *os.File
		if f, err = os.Open(abs); err == nil {
			var fi os.FileInfo
			fi, err = f.Stat()
			f.Close()
			if err == nil && !fi.Mode().IsRegular() {
				err = errors.New("not a regular file")
			}
		}
	}
	if err != nil {
		return "", setting.Errorf("%s %s: %w", s, path, err)
	}
	return abs, nil
}

// Args are the options as mariadbd arguments.
func (o ServerOptions) Args() []string {
	var out []string
	for _, opt := range append(append([]Option(nil), o.Layout...), o.Keys...) {
		out = append(out, "--"+strings.ReplaceAll(opt.Name, "_", "-")+"="+opt.Value)
	}
	return out
}

// Cnf is the options as a [mysqld] option-file group.
func (o ServerOptions) Cnf(datadir string) []byte {
	var b strings.Builder
	b.WriteString("# Options the datadir restored by ferry needs; include this file in the server's my.cnf.\n[mysqld]\n")
	fmt.Fprintf(&b, "datadir=%s\n", datadir)
	for _, opt := range append(append([]Option(nil), o.Layout...), o.Keys...) {
		fmt.Fprintf(&b, "%s=%s\n", opt.Name, opt.Value)
	}
	return []byte(b.String())
}

func oneOf(values ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		for _, want := range values {
			if strings.EqualFold(v, want) {
				return want, nil
			}
		}
		return "", fmt.Errorf("not one of %s", strings.Join(values, ", "))
	}
}

func intRange(lo, hi int) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return "", fmt.Errorf("not a number from %d to %d", lo, hi)
		}
		return strconv.Itoa(n), nil
	}
}

// pageSize accepts 4096..65536 (a power of two) or 4k..64k.
func pageSize(v string) (string, error) {
	n, err := optfile.ParseSize(v)
	if err != nil || n < 4096 || n > 65536 || n&(n-1) != 0 {
		return "", fmt.Errorf("not an InnoDB page size (4k, 8k, 16k, 32k or 64k)")
	}
	return strconv.FormatInt(n, 10), nil
}

// dataFileRe is one system tablespace file: a plain name (no directory: the files are
// in the datadir), a size, optionally autoextend with a maximum.
var dataFileRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}:[0-9]{1,12}[KkMmGg]?(:autoextend(:max:[0-9]{1,12}[KkMmGg]?)?)?$`)

// dataFilePath accepts innodb_data_file_path of files inside the datadir.
func dataFilePath(v string) (string, error) {
	files := strings.Split(v, ";")
	if len(files) > 64 {
		return "", fmt.Errorf("more than 64 system tablespace files")
	}
	for _, f := range files {
		name, _, _ := strings.Cut(f, ":")
		if !dataFileRe.MatchString(f) || name == "." || name == ".." {
			return "", fmt.Errorf("%q is not a file inside the datadir with a size (e.g. ibdata1:12M:autoextend)", f)
		}
	}
	return v, nil
}
