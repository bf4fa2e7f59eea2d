package testdb

import "testing"

// needServers fails a test that starts a server (mariadbd, S3, a Galera cluster) when
// the tests were built without the e2e tag: such tests belong in a file that starts with
// `//go:build e2e`, which .ci/run's second phase runs (docs/testing.md).
func needServers(t testing.TB, what string) {
	t.Helper()
	if !serversAllowed {
		t.Fatalf("this test starts %s: put it in a file marked //go:build e2e (docs/testing.md), so `go test ./...` stays fast and server-free", what)
	}
}
