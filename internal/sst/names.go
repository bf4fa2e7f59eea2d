package sst

import "github.com/ferry-backup/ferry/internal/setting"

// names spells the settings library errors name as the method's own: the [sst] key
// that set it (the one the operator wrote, tcert or ssl-cert as well as tls-cert), and
// wsrep_sst_auth for the shared secret and the donor's account.
func (c Config) names() setting.Names {
	n := setting.Names{
		setting.TokenFile:     "wsrep_sst_auth",
		setting.User:          "wsrep_sst_auth",
		setting.TLSCA:         "[sst] tls-ca",
		setting.TLSCert:       "[sst] tls-cert",
		setting.TLSKey:        "[sst] tls-key",
		setting.TLSServerName: "[sst] tls-server-name",
		setting.Compress:      "[sst] compress",
		setting.MaxRate:       "[sst] max-rate",
		setting.MaxSpool:      "[sst] max-spool",
		setting.Parallel:      "[sst] parallel",
		setting.Mariadbd:      "[sst] mariadbd",
	}
	for s, key := range c.keys {
		n[s] = "[sst] " + key
	}
	return n
}

// Explain returns err with the settings it names spelled as c's [sst] keys and
// wsrep_sst_auth, for the line the method logs; nil stays nil.
func (c Config) Explain(err error) error { return setting.Rename(err, c.names()) }
