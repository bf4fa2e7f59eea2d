package clone

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backoff"
	"github.com/ferry-backup/ferry/internal/setting"
	"golang.org/x/crypto/argon2"
)

// Security is how donor and recipient prove who they are. The channel is always TLS
// 1.3. With a token, each side proves it knows the secret with an HMAC bound to the
// TLS session (a man in the middle holds two sessions and cannot replay a proof); with
// certificates, TLS verifies them against CAFile. Both may be used together.
type Security struct {
	Token      []byte // the shared secret (whole contents of the token file)
	CertFile   string // this side's certificate (PEM) and key
	KeyFile    string
	CAFile     string // CA the peer's certificate must chain to
	ServerName string // recipient: name the donor's certificate must carry (default: host of the address)
	// Salt, if set, is mixed into the key stretched from the token (a Galera joiner's
	// random per-SST value, which only its donor learns, from mariadbd): guesses cannot
	// be computed once for every transfer.
	Salt []byte
	// ChainOnly checks the peer's certificate against CAFile but not the name in it (a
	// Galera donor knows its joiner only by the address mariadbd gives, often an IP).
	ChainOnly bool
}

// MinToken is the shortest token ferry accepts: the token proof is not a PAKE, so a
// guessable token could be attacked offline by an impostor donor.
const MinToken = 16

// ReadToken reads a token file: any string of at least MinToken bytes, surrounding
// whitespace ignored, in a file only its owner can read.
func ReadToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, setting.Errorf("read %s: %w", setting.TokenFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, setting.Errorf("read %s: %w", setting.TokenFile, err)
	}
	if fi.Mode().Perm()&0o044 != 0 {
		return nil, setting.Errorf("%s %s is readable by other users (mode %04o): chmod 600 %s", setting.TokenFile, path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, setting.Errorf("read %s: %w", setting.TokenFile, err)
	}
	t := []byte(strings.TrimSpace(string(b)))
	if len(t) < MinToken {
		return nil, setting.Errorf("%s %s holds %d bytes: a token needs at least %d (e.g. openssl rand -hex 32 > %s)", setting.TokenFile, path, len(t), MinToken, path)
	}
	return t, nil
}

// key stretches the token, so guessing a weak one costs real work per guess.
func (s Security) key() []byte {
	if len(s.Token) == 0 {
		return nil
	}
	return argon2.IDKey(s.Token, append([]byte("ferry clone v1"), s.Salt...), 1, 32<<10, 2, 32)
}

// proof is the HMAC a side sends: the stretched token over the TLS session's exported
// keying material and the side's role.
func proof(key []byte, cs tls.ConnectionState, role string) (string, error) {
	ekm, err := cs.ExportKeyingMaterial("EXPORTER-ferry-clone-auth", nil, 32)
	if err != nil {
		return "", fmt.Errorf("TLS keying material: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(role))
	m.Write(ekm)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// checkProof compares a received proof in constant time.
func checkProof(key []byte, cs tls.ConnectionState, role, got string) bool {
	want, err := proof(key, cs, role)
	return err == nil && hmac.Equal([]byte(want), []byte(got))
}

// serverTLS is the donor's TLS configuration.
func (s Security) serverTLS() (*tls.Config, error) {
	if len(s.Token) == 0 && s.CAFile == "" {
		return nil, setting.Errorf("ferry serve needs %s (a shared secret) or %s with %s and %s (client certificates): it never serves unauthenticated peers", setting.TokenFile, setting.TLSCA, setting.TLSCert, setting.TLSKey)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	cert, err := s.ownCert(true)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{cert}
	if s.CAFile != "" {
		pool, err := loadCA(s.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// clientTLS is the recipient's TLS configuration for a donor at host.
func (s Security) clientTLS(host string) (*tls.Config, error) {
	if len(s.Token) == 0 && s.CAFile == "" {
		return nil, setting.Errorf("ferry clone needs %s (the donor's shared secret) or %s (the CA of the donor's certificate)", setting.TokenFile, setting.TLSCA)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: host}
	if s.ServerName != "" {
		cfg.ServerName = s.ServerName
	}
	if s.CAFile != "" {
		pool, err := loadCA(s.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
		if s.ChainOnly {
			cfg.InsecureSkipVerify = true // the chain is checked below, the name is not
			cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, pool) }
		}
	} else {
		// No CA: the donor's certificate is ephemeral and the token proof, bound to this
		// TLS session, authenticates it instead.
		cfg.InsecureSkipVerify = true
	}
	if s.CertFile != "" || s.KeyFile != "" {
		cert, err := s.ownCert(false)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// errCertWithoutKey refuses a certificate given without its key, or a key without
// its certificate.
var errCertWithoutKey = setting.Errorf("%s and %s go together", setting.TLSCert, setting.TLSKey)

// Check refuses what is wrong in s itself, without reading a file: a certificate
// without its key. A front end calls it to refuse early; the TLS setup checks again.
func (s Security) Check() error {
	if (s.CertFile == "") != (s.KeyFile == "") {
		return errCertWithoutKey
	}
	return nil
}

// ownCert loads --tls-cert/--tls-key, or makes an ephemeral self-signed certificate
// when ephemeral is allowed and none is given.
func (s Security) ownCert(ephemeral bool) (tls.Certificate, error) {
	if s.CertFile == "" && s.KeyFile == "" && ephemeral {
		return selfSigned()
	}
	if s.CertFile == "" || s.KeyFile == "" {
		return tls.Certificate{}, errCertWithoutKey
	}
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return tls.Certificate{}, setting.Errorf("load %s %s / %s %s: %w", setting.TLSCert, s.CertFile, setting.TLSKey, s.KeyFile, err)
	}
	return cert, nil
}

// verifyChain checks that the peer's certificate chains to pool, whatever name it carries.
func verifyChain(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

func loadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, setting.Errorf("read %s: %w", setting.TLSCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, setting.Errorf("%s %s holds no PEM certificate", setting.TLSCA, path)
	}
	return pool, nil
}

// ephemeralCN names the certificate ferry serve makes when it is given none.
const ephemeralCN = "ferry serve (ephemeral)"

// selfSigned makes a throwaway P-256 certificate for one run of ferry serve.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: ephemeralCN},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("make ephemeral certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// explainTLS turns a failed handshake into what to do about it.
func explainTLS(err error, addr string) error {
	if e := explainCert(err, addr); e != nil {
		return backoff.Permanent(e) // no retry mends a certificate or a protocol
	}
	return fmt.Errorf("TLS handshake with %s: %w", addr, err)
}

// explainCert says what to fix when a handshake failed on a certificate or met
// another protocol; nil for anything else (a dropped connection, say).
func explainCert(err error, addr string) error {
	msg := err.Error()
	var unknown x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.As(err, &hostErr) && hostErr.Certificate != nil && hostErr.Certificate.Subject.CommonName == ephemeralCN:
		return setting.Errorf("the donor %s presented its ephemeral certificate, not one signed by %s: it runs with %s only; drop %s or give ferry serve %s/%s signed by that CA", addr, setting.TLSCA, setting.TokenFile, setting.TLSCA, setting.TLSCert, setting.TLSKey)
	case errors.As(err, &unknown):
		return setting.Errorf("the donor %s presented a certificate not signed by %s: check the CA file, or use %s alone", addr, setting.TLSCA, setting.TokenFile)
	case errors.As(err, &hostErr):
		return setting.Errorf("the donor's certificate is not valid for %s (%v): connect by a name it carries or pass %s", addr, hostErr, setting.TLSServerName)
	case strings.Contains(msg, "certificate required"):
		return setting.Errorf("the donor %s requires a client certificate: pass %s and %s signed by the CA it trusts", addr, setting.TLSCert, setting.TLSKey)
	case strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate authority"):
		return setting.Errorf("the donor %s rejected this client certificate: it is not signed by the CA the donor's %s holds", addr, setting.TLSCA)
	case strings.Contains(msg, "first record does not look like a TLS handshake") || strings.Contains(msg, "protocol version"):
		return fmt.Errorf("%s does not speak ferry's TLS protocol: is it a ferry serve of a matching version?", addr)
	}
	return nil
}

// bufConn pairs a TLS connection with its buffered reader and writer.
type bufConn struct {
	c *tls.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// newBufConn starts with small buffers: a peer that has not authenticated gets no
// more than a few KiB of memory. grow gives an authenticated connection its own.
func newBufConn(c *tls.Conn) *bufConn {
	return &bufConn{c: c, r: bufio.NewReaderSize(c, maxHandshake), w: bufio.NewWriterSize(c, maxHandshake)}
}

// grow gives an authenticated connection the buffers of a data stream, keeping any
// bytes already read ahead.
func (b *bufConn) grow() {
	var src io.Reader = b.c
	if n := b.r.Buffered(); n > 0 {
		ahead, _ := b.r.Peek(n)
		src = io.MultiReader(bytes.NewReader(append([]byte(nil), ahead...)), b.c)
	}
	b.r = bufio.NewReaderSize(src, 1<<20)
	b.w = bufio.NewWriterSize(b.c, 256<<10)
}

// send writes and flushes one frame.
func (b *bufConn) send(f *frame) error {
	if err := writeFrame(b.w, f); err != nil {
		return err
	}
	return b.w.Flush()
}

// Describe names the authentication in use, for logs: "token", "certificates" or both.
func (s Security) Describe() string {
	var parts []string
	if len(s.Token) > 0 {
		parts = append(parts, "token")
	}
	if s.CAFile != "" {
		parts = append(parts, "certificates")
	}
	return strings.Join(parts, "+")
}
