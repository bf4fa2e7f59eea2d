//go:build !testhooks

package main

import "github.com/ferry-backup/ferry/internal/backup"

// applyTestHooks does nothing in a production binary: the test hooks (testhooks.go)
// are compiled in only with -tags testhooks.
func applyTestHooks(*backup.Config) {}
