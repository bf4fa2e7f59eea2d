package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"

	"github.com/ferry-backup/ferry/internal/setting"
)

// Recipients collects the age public keys a backup is encrypted to: keys given inline
// ("age1...") and files holding public keys (one per line, '#' comments, as age -R) or
// identities (the key-file mode of simple setups: the same file, e.g. from ferry keygen,
// on both sides; only its public keys are used to encrypt).
func Recipients(keys []string, files []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, k := range keys {
		r, err := age.ParseX25519Recipient(strings.TrimSpace(k))
		if err != nil {
			return nil, setting.Errorf("%s %q is not an age public key (age1...): %w", setting.EncryptTo, k, err)
		}
		out = append(out, r)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, setting.Errorf("%s: %w", setting.EncryptToFile, err)
		}
		rs, err := recipientsIn(b)
		if err != nil {
			return nil, setting.Errorf("%s %s holds neither age public keys (age1...) nor identities (AGE-SECRET-KEY-1...)", setting.EncryptToFile, f)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// recipientsIn parses a recipients file, or an identity file for its public keys.
func recipientsIn(b []byte) ([]age.Recipient, error) {
	if rs, err := age.ParseRecipients(bytes.NewReader(b)); err == nil {
		return rs, nil
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var out []age.Recipient
	for _, id := range ids {
		x, ok := id.(*age.X25519Identity)
		if !ok {
			return nil, errors.New("not an X25519 identity")
		}
		out = append(out, x.Recipient())
	}
	return out, nil
}

// Identities reads an age identity file (AGE-SECRET-KEY-... lines, as age-keygen and
// ferry keygen write). The error never quotes the file's content.
func Identities(path string) ([]age.Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, setting.Errorf("%s: %w", setting.IdentityFile, err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, setting.Errorf("%s %s holds no valid age identity (expected AGE-SECRET-KEY-1... lines)", setting.IdentityFile, path)
	}
	return ids, nil
}

// NewIdentity generates an X25519 identity: the file content to keep secret and the
// public key to encrypt to.
func NewIdentity() (secret, public string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", "", err
	}
	return id.String(), id.Recipient().String(), nil
}

// Encrypt returns a writer that encrypts to w for recipients; Close finishes the file.
func Encrypt(w io.Writer, recipients []age.Recipient) (io.WriteCloser, error) {
	ew, err := age.Encrypt(w, recipients...)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return ew, nil
}

// ErrWrongKey means no identity given matches the recipients a file was encrypted to.
var ErrWrongKey = setting.Errorf("wrong key: the %s does not match any recipient the backup was encrypted to", setting.IdentityFile)

// ErrNoIdentity means an encrypted file was met and no identity was given.
var ErrNoIdentity = setting.Errorf("the backup is encrypted: pass %s with the age identity (secret key) it was encrypted to", setting.IdentityFile)

// Decrypt returns a reader of the plaintext of the age file r. A file that none of ids
// can open gives a clear error.
func Decrypt(r io.Reader, ids []age.Identity) (io.Reader, error) {
	if len(ids) == 0 {
		return nil, ErrNoIdentity
	}
	d, err := age.Decrypt(r, ids...)
	var noMatch *age.NoIdentityMatchError
	if errors.As(err, &noMatch) {
		return nil, ErrWrongKey
	}
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	return d, nil
}
