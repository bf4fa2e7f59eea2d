package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/setting"
)

// TestFlagTextSpellsFlags: an internal/ error names the setting (TLS certificate), the
// command line prints the flag. internal/sst's TestExplainSpellsSSTKeys renders the
// same error as [sst] keys.
func TestFlagTextSpellsFlags(t *testing.T) {
	err := clone.Serve(context.Background(), clone.ServeConfig{Security: clone.Security{Token: []byte(strings.Repeat("t", clone.MinToken)), CertFile: "/c.pem"}})
	if err == nil || err.Error() != "TLS certificate and TLS key go together" {
		t.Fatalf("clone.Serve with a certificate and no key: %v", err)
	}
	if got, want := flagText(err), "--tls-cert and --tls-key go together"; got != want {
		t.Fatalf("flagText = %q, want %q", got, want)
	}
}

// TestFlagNamesComplete: every setting has a flag, so no error of ferry's command
// line prints a human name where a flag is meant.
func TestFlagNamesComplete(t *testing.T) {
	names := flagNames()
	for _, s := range setting.All() {
		if !strings.HasPrefix(names[s], "--") {
			t.Errorf("setting %q has no flag in flagNames", s)
		}
	}
}
