package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/ferry-backup/ferry/internal/signing"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/spf13/pflag"
)

// repoFlags locate a repository. Credentials are never flags: they come from the AWS
// environment variables or shared files.
type repoFlags struct {
	url   string
	s3    storage.S3Options
	trust string // --trust-key, for the verbs that read backups
	// which is the setting the url came from, for errors (default --repo; copy's
	// --from and --to).
	which setting.Setting
}

// addTrust registers --trust-key (restore, verify).
func (r *repoFlags) addTrust(fs *pflag.FlagSet) {
	fs.StringVar(&r.trust, "trust-key", "", "repository: refuse any backup whose manifest this signing key (ferrysign1..., or a file holding it) did not sign, before reading anything else of it; every object is then checked by its SHA-256")
}

// add registers --repo and the S3 options.
func (r *repoFlags) add(fs *pflag.FlagSet) {
	fs.Var(onceString{v: &r.url, set: new(bool), hint: repoTwice}, "repo", "repository: s3://bucket/prefix, or a directory (or file:///dir, e.g. an NFS mount)")
	r.addS3(fs)
}

// repoTwice is the advice for a --repo given twice: a backup goes to one repository.
const repoTwice = "one repository per run; to keep a backup in a second one, copy it there: ferry copy --from R1 --to R2 latest"

// addS3 registers the S3 options.
func (r *repoFlags) addS3(fs *pflag.FlagSet) {
	fs.StringVar(&r.s3.Endpoint, "s3-endpoint", "", "S3-compatible server URL (default AWS_ENDPOINT_URL, the profile's endpoint_url, or AWS)")
	fs.StringVar(&r.s3.Region, "s3-region", "", "region (default AWS_REGION, the profile's region, or us-east-1)")
	fs.StringVar(&r.s3.Profile, "s3-profile", "", "profile in ~/.aws/credentials and ~/.aws/config (default AWS_PROFILE or default)")
	fs.StringVar(&r.s3.PathStyle, "s3-path-style", "auto", "bucket addressing: auto (path-style except on AWS), path or virtual")
	fs.StringVar(&r.s3.CAFile, "s3-ca-file", "", "PEM file of the CA that signed the S3 server's certificate")
}

// open opens the repository; create makes it if the location holds none (backup).
func (r *repoFlags) open(ctx context.Context, log *slog.Logger, create bool, version string) (*repo.Repo, error) {
	if r.url == "" {
		return nil, usageErr("--repo is required: s3://bucket/prefix or a directory")
	}
	var pub ed25519.PublicKey
	if r.trust != "" {
		var err error
		if pub, err = signing.LoadPublic(r.trust); err != nil {
			return nil, usagef("--trust-key: %w", err)
		}
	}
	st, err := storage.Open(ctx, storage.Config{URL: r.url, S3: r.s3, Log: log, Setting: r.which})
	if err != nil {
		return nil, err
	}
	if create {
		return repo.Init(ctx, st, version)
	}
	rp, err := repo.Open(ctx, st)
	if err == nil && pub != nil {
		rp.Trust(pub)
	}
	return rp, err
}

// onceString is a string flag given at most once: a second value (--repo A --repo B)
// is refused, where pflag would keep the last silently. An option file's value, which
// the command line or a stronger group replaces, is forgotten first (setFlags).
type onceString struct {
	v    *string
	set  *bool
	hint string // what to do instead, after "given twice"
}

func (o onceString) String() string {
	if o.v == nil {
		return ""
	}
	return *o.v
}

func (o onceString) Type() string { return "string" }

// Set implements pflag.Value.
func (o onceString) Set(v string) error {
	if *o.set && v != *o.v {
		return fmt.Errorf("given twice (%s and %s): %s", *o.v, v, o.hint)
	}
	*o.v, *o.set = v, true
	return nil
}

// forget lets the next Set replace the value (one from an option file).
func (o onceString) forget() { *o.set = false }
