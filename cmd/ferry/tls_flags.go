package main

import (
	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/spf13/pflag"
)

// securityFlags are how serve and clone authenticate each other.
type securityFlags struct {
	tokenFile string
	sec       clone.Security
}

func (s *securityFlags) add(fs *pflag.FlagSet, side string) {
	fs.StringVar(&s.tokenFile, "token-file", "", "file holding the shared secret both hosts use (e.g. openssl rand -hex 32); never on the command line")
	fs.StringVar(&s.sec.CertFile, "tls-cert", "", side+"'s TLS certificate (PEM); with --tls-ca, authenticates instead of or besides the token")
	fs.StringVar(&s.sec.KeyFile, "tls-key", "", "key of --tls-cert (PEM)")
	fs.StringVar(&s.sec.CAFile, "tls-ca", "", "CA (PEM) the other side's certificate must be signed by")
}

// resolve reads the token file.
func (s *securityFlags) resolve() (clone.Security, error) {
	if s.tokenFile != "" {
		t, err := clone.ReadToken(s.tokenFile)
		if err != nil {
			return s.sec, err
		}
		s.sec.Token = t
	}
	return s.sec, nil
}
