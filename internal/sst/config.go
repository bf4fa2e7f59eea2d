package sst

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/optfile"
	"github.com/ferry-backup/ferry/internal/setting"
)

// Config is the method's settings: the [sst] group of the server's option files and
// the SST credentials.
type Config struct {
	// Auth is wsrep_sst_auth, "user:password": the donor's connection to its server,
	// and (when no certificates are given) the secret both ends prove they know.
	Auth string
	// CA, Cert and Key authenticate the ends by certificates instead of, or besides,
	// the secret (tls-ca/tls-cert/tls-key, or the stock ssl-ca/ssl-cert/ssl-key).
	CA, Cert, Key string
	// ServerName, if set, is the name the joiner's certificate must carry; by default
	// only its chain to CA is checked (the donor knows the joiner by an address).
	ServerName string
	Streams    int
	Compress   string
	MaxRate    int64
	MaxImpact  float64 // a share, 0.2 for max-impact=20
	Parallel   int
	// InitialTimeout bounds the joiner's wait for the donor's first connection
	// (sst-initial-timeout, 300 s as mariabackup's).
	InitialTimeout time.Duration
	// Grace is how long a broken transfer waits for its connections to come back
	// (reconnect-wait, seconds; 30 by default).
	Grace     time.Duration
	Tmpdir    string // the donor's redo spool
	MaxSpool  int64
	Mariadbd  string // the joiner's mariadbd for prepare
	UseMemory string // the joiner's recovery buffer pool
	// RemoveOld deletes the joiner's old datadir once the new copy is in place
	// (remove-old-datadir); by default it is kept beside as DATADIR.ferry-old-TIME.
	RemoveOld bool
	// keys are the [sst] keys the TLS settings were read from, as the operator wrote
	// them (tcert, ssl-cert, tls-cert): errors name the one that was set.
	keys map[setting.Setting]string
}

// Defaults of Config.
const (
	DefaultInitialTimeout = 300 * time.Second // a joiner's wait for the donor's first connection
	DefaultGrace          = 30 * time.Second  // a broken transfer's wait for its connections
)

// maxAuthInput bounds what is read of the donor's stdin.
const maxAuthInput = 64 << 10

// LoadConfig reads [sst] from the server's option files (as its --defaults-file,
// --defaults-extra-file and --defaults-group-suffix say) and the credentials: the
// WSREP_SST_OPT_AUTH environment variable (10.11), else "sst_user=" and
// "sst_password=" lines on stdin when stdin is a pipe (newer servers), else [sst]
// wsrep-sst-auth.
func LoadConfig(ctx context.Context, a Args, getenv func(string) string, stdin *os.File) (Config, error) {
	o, err := optfile.ReadGroups(ctx, optfile.Sources{DefaultsFile: a.DefaultsFile, DefaultsExtraFile: a.DefaultsExtraFile,
		GroupSuffix: a.DefaultsGroupSuffix}, "sst")
	if err != nil {
		return Config{}, err
	}
	// No compression by default: Galera's synchronous replication already needs a fast
	// link between nodes, and on a fast link compression costs CPU on both ends (measured
	// with bench/sst.sh: auto took 13 s where none took 12). [sst] compress=auto for a WAN.
	c := Config{Streams: clone.DefaultStreams, Compress: clone.CompressNone, InitialTimeout: DefaultInitialTimeout, Grace: DefaultGrace}
	if err := c.apply(o); err != nil {
		return c, err
	}
	c.Auth = authFrom(getenv("WSREP_SST_OPT_AUTH"))
	if c.Auth == "" && a.Role == RoleDonor && isPipe(stdin) {
		if c.Auth, err = readStdinAuthWithin(stdin, 5*time.Second); err != nil {
			return c, err
		}
	}
	if c.Auth == "" {
		c.Auth = authFrom(o["wsrep_sst_auth"])
	}
	return c, nil
}

// authFrom takes wsrep_sst_auth as the server gives it ("(null)" when unset).
func authFrom(s string) string {
	if s = strings.TrimSpace(s); s == "(null)" {
		return ""
	}
	return s
}

// apply takes the [sst] options ferry knows; the stock methods' other options are
// ignored, so one [sst] group can serve a cluster that changes methods.
func (c *Config) apply(o optfile.Options) error {
	pick := func(names ...string) string {
		for _, n := range names {
			if v, ok := o[n]; ok {
				return v
			}
		}
		return ""
	}
	pickAs := func(s setting.Setting, names ...string) string {
		for _, n := range names {
			if v, ok := o[n]; ok {
				if c.keys == nil {
					c.keys = map[setting.Setting]string{}
				}
				c.keys[s] = strings.ReplaceAll(n, "_", "-")
				return v
			}
		}
		return ""
	}
	c.CA, c.Cert, c.Key = pickAs(setting.TLSCA, "tls_ca", "ssl_ca", "tca"), pickAs(setting.TLSCert, "tls_cert", "ssl_cert", "tcert"), pickAs(setting.TLSKey, "tls_key", "ssl_key", "tkey")
	c.ServerName = pick("tls_server_name")
	var err error
	num := func(name string, dst *int) {
		if v, ok := o[name]; ok && err == nil {
			if *dst, err = strconv.Atoi(v); err != nil || *dst < 1 {
				err = fmt.Errorf("[sst] %s=%s: want a positive number", name, v)
			}
		}
	}
	num("streams", &c.Streams)
	num("parallel", &c.Parallel)
	size := func(name string, dst *int64) {
		if v, ok := o[name]; ok && err == nil {
			if *dst, err = optfile.ParseSize(v); err != nil {
				err = fmt.Errorf("[sst] %s: %w", name, err)
			}
		}
	}
	size("max_rate", &c.MaxRate)
	size("max_spool", &c.MaxSpool)
	if err != nil {
		return err
	}
	if v, ok := o["compress"]; ok {
		if _, err := clone.ParseCompress(v); err != nil {
			return err // names the compression setting: Explain spells it [sst] compress
		}
		c.Compress = v
	}
	if v, ok := o["max_impact"]; ok {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p <= 0 || p >= 100 {
			return fmt.Errorf("[sst] max-impact=%s: want a percent between 0 and 100", v)
		}
		c.MaxImpact = p / 100
	}
	for name, dst := range map[string]*time.Duration{"sst_initial_timeout": &c.InitialTimeout, "reconnect_wait": &c.Grace} {
		if v, ok := o[name]; ok {
			s, err := strconv.Atoi(v)
			if err != nil || s < 1 {
				return fmt.Errorf("[sst] %s=%s: want a number of seconds", strings.ReplaceAll(name, "_", "-"), v)
			}
			*dst = time.Duration(s) * time.Second
		}
	}
	c.Tmpdir, c.Mariadbd = pick("tmpdir"), pick("mariadbd")
	if v := pick("use_memory"); v != "" {
		c.UseMemory = v
	}
	if v, ok := o["remove_old_datadir"]; ok {
		c.RemoveOld = v == "" || v == "1" || strings.EqualFold(v, "on") || strings.EqualFold(v, "true")
	}
	return nil
}

// isPipe tells whether f is a pipe or FIFO (the server writing the credentials), not
// a terminal or /dev/null.
func isPipe(f *os.File) bool {
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// readStdinAuthWithin is readStdinAuth bounded in time: a newer server writes the lines
// and closes the pipe at once, but an inherited pipe nobody closes must not hold the
// donor (its node stays a donor while the method runs).
func readStdinAuthWithin(r io.Reader, d time.Duration) (string, error) {
	type result struct {
		auth string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		a, err := readStdinAuth(r)
		done <- result{a, err}
	}()
	select {
	case res := <-done:
		return res.auth, res.err
	case <-time.After(d):
		return "", nil
	}
}

// readStdinAuth reads the "sst_user=" and "sst_password=" lines a newer server writes
// to the donor's stdin before closing it.
func readStdinAuth(r io.Reader) (string, error) {
	var user, pass string
	sc := bufio.NewScanner(io.LimitReader(r, maxAuthInput))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "sst_user":
			user = v
		case "sst_password":
			pass = v
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read the SST credentials on stdin: %w", err)
	}
	if user == "" {
		return "", nil
	}
	return user + ":" + pass, nil
}

// security is how joiner and donor authenticate each other: certificates when [sst]
// names them, and a secret derived from wsrep_sst_auth (the same on every node) when
// it is set; an SST with neither is refused.
func (c Config) security() (clone.Security, error) {
	sec := clone.Security{CAFile: c.CA, CertFile: c.Cert, KeyFile: c.Key, ServerName: c.ServerName, ChainOnly: c.ServerName == ""}
	if c.Auth != "" {
		sec.Token = []byte("ferry sst\x00" + c.Auth)
	}
	if len(sec.Token) == 0 && sec.CAFile == "" {
		return sec, fmt.Errorf("no wsrep_sst_auth and no [sst] tls-ca: ferry never sends or takes a datadir without authenticating the other node; set wsrep_sst_auth=user:password (the same on every node) or [sst] tls-ca, tls-cert and tls-key")
	}
	// Before the joiner says "ready": clone's own check, named as [sst] keys by Explain.
	return sec, sec.Check()
}
