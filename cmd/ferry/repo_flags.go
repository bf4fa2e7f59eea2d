package main

import (
	"context"
	"log/slog"

	"github.com/ferry-backup/ferry/internal/repo"
	"github.com/ferry-backup/ferry/internal/storage"
	"github.com/spf13/pflag"
)

// repoFlags locate a repository. Credentials are never flags: they come from the AWS
// environment variables or shared files.
type repoFlags struct {
	url string
	s3  storage.S3Options
}

// add registers --repo and the S3 options.
func (r *repoFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&r.url, "repo", "", "repository: s3://bucket/prefix, or a directory (or file:///dir, e.g. an NFS mount)")
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
	st, err := storage.Open(ctx, storage.Config{URL: r.url, S3: r.s3, Log: log})
	if err != nil {
		return nil, err
	}
	if create {
		return repo.Init(ctx, st, version)
	}
	return repo.Open(ctx, st)
}
