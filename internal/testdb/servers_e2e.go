//go:build e2e

package testdb

// serversAllowed: built with the e2e tag, tests may start servers.
const serversAllowed = true
