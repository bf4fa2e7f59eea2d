package storage

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/setting"
	"github.com/minio/minio-go/v7"
)

// ErrAccess means the server refused the credentials or the request: retrying cannot
// help, the user must fix the configuration.
var ErrAccess = errors.New("access refused")

// accessError is a configuration error whose message says what to fix; it matches
// ErrAccess without repeating it, and backoff.ErrPermanent: no retry mends it.
type accessError struct{ err error }

func (e *accessError) Error() string { return e.err.Error() }
func (e *accessError) Unwrap() error { return e.err }
func (e *accessError) Is(target error) bool {
	return target == ErrAccess || target == backoff.ErrPermanent
}

func accessErr(format string, args ...any) error {
	return &accessError{setting.Errorf(format, args...)}
}

// wrap turns a client error into one that says what to do, marking the transient ones.
func (s *S3) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("s3 %s %s", op, key)
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code != "" {
		return s.wrapResponse(what, resp, err)
	}
	if errors.As(err, &resp) && resp.StatusCode != 0 {
		return s.wrapStatus(what, resp.StatusCode, err)
	}
	return s.wrapNet(what, err)
}

// wrapResponse classifies an error the server answered with an S3 error code.
func (s *S3) wrapResponse(what string, resp minio.ErrorResponse, err error) error {
	switch resp.Code {
	case "NoSuchKey":
		return fmt.Errorf("%s: %w", what, ErrNotExist)
	case "NoSuchBucket":
		return accessErr("bucket %q does not exist at %s: create it first (ferry does not create buckets) or fix the bucket name in %s", s.t.bucket, s.t.endpoint.Redacted(), s.t.setting)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "TokenRefreshRequired",
		"XAdminUserNotFound": // versitygw's answer to an unknown key id
		return accessErr("%s at %s: the server refused the credentials (%s): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile", what, s.t.endpoint.Redacted(), resp.Code)
	case "AccessDenied", "AllAccessDisabled", "AccountProblem":
		return accessErr("%s at %s: access denied: the credentials need s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on %s", what, s.t.endpoint.Redacted(), s.t.bucket)
	case "AuthorizationHeaderMalformed", "IllegalLocationConstraintException", "PermanentRedirect":
		return accessErr("%s: the bucket %s is not in region %s (%s): set %s or AWS_REGION", what, s.t.bucket, s.t.region, resp.Message, setting.S3Region)
	case "RequestTimeTooSkewed":
		return accessErr("%s: this host's clock differs too much from the server's: fix the clock (NTP)", what)
	case "BadDigest", "XAmzContentChecksumMismatch", "InvalidDigest":
		// The bytes changed on their way: a new attempt sends them again.
		return Transient(fmt.Errorf("%s: the server found the upload damaged (%s)", what, resp.Code))
	case "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling", "ThrottlingException", "RequestLimitExceeded", "OperationAborted":
		return Transient(fmt.Errorf("%s: %s (%s)", what, resp.Message, resp.Code))
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return Transient(fmt.Errorf("%s: %s (%s, HTTP %d)", what, resp.Message, resp.Code, resp.StatusCode))
	}
	// A code this classification does not know: say what the server said.
	return fmt.Errorf("%s at %s: %s (%s, HTTP %d)", what, s.t.endpoint.Redacted(), resp.Message, resp.Code, resp.StatusCode)
}

// wrapStatus classifies by HTTP status when the server sent no known code.
func (s *S3) wrapStatus(what string, status int, err error) error {
	switch {
	case status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", what, ErrNotExist)
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return accessErr("%s at %s: access denied (HTTP %d): check the credentials and the bucket policy", what, s.t.endpoint.Redacted(), status)
	case status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500:
		return Transient(fmt.Errorf("%s: HTTP %d: %v", what, status, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// wrapNet classifies transport errors: a dropped or refused connection, a timeout or a
// short body is worth retrying; a bad certificate or an unknown host is not.
func (s *S3) wrapNet(what string, err error) error {
	var dnsErr *net.DNSError
	var certErr *x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return accessErr("%s: S3 endpoint host %s not found: check %s / AWS_ENDPOINT_URL", what, s.t.endpoint.Hostname(), setting.S3Endpoint)
	case errors.As(err, &certErr), errors.As(err, &hostErr):
		return accessErr("%s: the TLS certificate of %s is not trusted (%v): pass %s with the CA that signed it", what, s.t.endpoint.Host, err, setting.S3CAFile)
	case errors.Is(err, syscall.ECONNREFUSED):
		return Transient(fmt.Errorf("%s: cannot connect to %s: %w", what, s.t.endpoint.Host, err))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, context.DeadlineExceeded):
		return Transient(fmt.Errorf("%s: %w", what, err))
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return Transient(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}
