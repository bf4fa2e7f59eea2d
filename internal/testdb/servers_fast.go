//go:build !e2e

package testdb

// serversAllowed: without the e2e tag (the fast phase, `go test ./...`), a test that
// starts a server fails at once instead of slowing the fast loop down.
const serversAllowed = false
