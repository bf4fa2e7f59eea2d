//go:build testhooks

package main

import (
	"os"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
)

// trackerStallEnv names the test hook that stalls a backup's page tracker (e2e: the
// server laps it and the page-LSN fallback runs). Only a binary built with
// -tags testhooks reads it; the e2e tests build theirs so.
const trackerStallEnv = "FERRY_TEST_TRACKER_STALL"

// applyTestHooks sets the backup's test hooks from the environment.
func applyTestHooks(cfg *backup.Config) {
	if d, err := time.ParseDuration(os.Getenv(trackerStallEnv)); err == nil {
		cfg.TrackerStall = d
	}
}
