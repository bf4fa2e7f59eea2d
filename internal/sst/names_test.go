package sst

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/optfile"
)

// TestExplainSpellsSSTKeys: the error clone gives a certificate without its key names
// the [sst] key the operator set (tcert), not ferry clone's --tls-cert
// (cmd/ferry's TestFlagTextSpellsFlags renders the same error as flags).
func TestExplainSpellsSSTKeys(t *testing.T) {
	c := Config{Auth: "sst:secret"}
	if err := c.apply(optfile.Options{"tcert": "/c.pem"}); err != nil {
		t.Fatal(err)
	}
	sec, err := c.security() // refused before the joiner says "ready"
	if got, want := c.Explain(err).Error(), "[sst] tcert and [sst] tls-key go together"; err == nil || got != want {
		t.Fatalf("security: %q, want %q", got, want)
	}
	if sec.Token = []byte(strings.Repeat("t", clone.MinToken)); sec.CertFile != "/c.pem" {
		t.Fatalf("tcert not read: %+v", sec)
	}
	err = clone.Serve(context.Background(), clone.ServeConfig{Security: sec}) // clone's own check: the same line
	if got, want := c.Explain(err).Error(), "[sst] tcert and [sst] tls-key go together"; err == nil || got != want {
		t.Fatalf("Explain = %q, want %q", got, want)
	}
	if c.Explain(nil) != nil {
		t.Fatal("Explain(nil) is not nil")
	}
	if err := c.apply(optfile.Options{"compress": "brotli"}); err == nil || c.Explain(err).Error() != `[sst] compress "brotli": use auto, none, lz4 or zstd` {
		t.Fatalf("[sst] compress=brotli: %v", c.Explain(err))
	}
}
