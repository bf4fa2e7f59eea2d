package storage

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"gopkg.in/ini.v1"

	"github.com/ferry-backup/ferry/internal/setting"
)

// S3Options are the settings of an S3 repository that do not come from its URL. Each
// empty field is taken from the standard AWS environment and shared files, as the AWS
// CLI does: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION / AWS_DEFAULT_REGION,
// AWS_PROFILE, and the profile's region and endpoint_url in ~/.aws/config
// (AWS_CONFIG_FILE). Credentials are never options: they come from AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), the profile in ~/.aws/credentials
// (AWS_SHARED_CREDENTIALS_FILE), or the instance/container role.
type S3Options struct {
	Endpoint  string // URL of an S3-compatible server, e.g. http://127.0.0.1:7070
	Region    string
	Profile   string
	PathStyle string // auto (default: path-style except on AWS), path or virtual
	CAFile    string // PEM bundle to trust for a server with a private CA
}

// s3Target is the resolved configuration of one S3 repository.
type s3Target struct {
	bucket, prefix string
	endpoint       *url.URL
	region         string
	lookup         string
	caFile         string
	creds          *credentials.Credentials
	setting        setting.Setting // where the URL came from, for errors
}

// resolveS3 fills the target of s3://bucket/prefix from o, the environment and the
// AWS shared files.
func resolveS3(u *url.URL, o S3Options, which setting.Setting) (*s3Target, error) {
	if u.User != nil {
		return nil, setting.Errorf("%s must not carry credentials: remove them from the URL and set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a profile", which)
	}
	if u.Host == "" {
		return nil, setting.Errorf("%s %s names no bucket: use s3://bucket/prefix", which, u.Redacted())
	}
	profile := firstOf(o.Profile, os.Getenv("AWS_PROFILE"), "default")
	prof := configProfile(profile)
	t := &s3Target{bucket: u.Host, prefix: strings.Trim(u.Path, "/"), caFile: o.CAFile, setting: which}
	t.region = firstOf(o.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), prof["region"], "us-east-1")
	ep := firstOf(o.Endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"), prof["endpoint_url"], "https://s3."+t.region+".amazonaws.com")
	eu, err := url.Parse(ep)
	if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
		return nil, setting.Errorf("S3 endpoint %q is not an http(s) URL: set %s or AWS_ENDPOINT_URL like http://host:port", ep, setting.S3Endpoint)
	}
	if eu.User != nil {
		return nil, errors.New("the S3 endpoint URL must not carry credentials")
	}
	t.endpoint = eu
	switch t.lookup = firstOf(o.PathStyle, "auto"); t.lookup {
	case "auto", "path", "virtual":
	default:
		return nil, setting.Errorf("%s %q: use auto, path or virtual", setting.S3PathStyle, o.PathStyle)
	}
	t.creds = credentialChain(profile)
	v, err := t.creds.GetWithContext(&credentials.CredContext{})
	if err != nil || v.AccessKeyID == "" {
		return nil, fmt.Errorf("no S3 credentials found for %s: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a profile in ~/.aws/credentials", u.Redacted())
	}
	return t, nil
}

// credentialChain is the AWS CLI's order: environment, shared credentials file, then
// the container or instance role (unless AWS_EC2_METADATA_DISABLED=true).
func credentialChain(profile string) *credentials.Credentials {
	chain := []credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{Profile: profile},
	}
	if !strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		chain = append(chain, &credentials.IAM{})
	}
	return credentials.NewChainCredentials(chain)
}

// configProfile reads region and endpoint_url of a profile in ~/.aws/config.
func configProfile(profile string) map[string]string {
	path := os.Getenv("AWS_CONFIG_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		path = filepath.Join(home, ".aws", "config")
	}
	f, err := ini.Load(path)
	if err != nil {
		return nil
	}
	name := "profile " + profile
	if profile == "default" {
		name = "default"
	}
	sec, err := f.GetSection(name)
	if err != nil {
		return nil
	}
	return map[string]string{"region": sec.Key("region").String(), "endpoint_url": sec.Key("endpoint_url").String()}
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
