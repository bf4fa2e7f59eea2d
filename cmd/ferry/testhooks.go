//go:build testhooks

package main

import (
	"os"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/backup"
)

// trackerStallEnv names the test hook that stalls a backup's page tracker (e2e: the
// server laps it and the page-LSN fallback runs). Only a binary built with
// -tags testhooks reads it; the e2e tests build theirs so.
const trackerStallEnv = "FERRY_TEST_TRACKER_STALL"

// leaveOutEnv names the test hook that makes a backup leave out the server's files at
// these datadir-relative paths (comma-separated): a backup that verifies but restores
// without a table, for the restore drill's e2e test.
const leaveOutEnv = "FERRY_TEST_LEAVE_OUT"

// applyTestHooks sets the backup's test hooks from the environment.
func applyTestHooks(cfg *backup.Config) {
	if d, err := time.ParseDuration(os.Getenv(trackerStallEnv)); err == nil {
		cfg.TrackerStall = d
	}
	if v := os.Getenv(leaveOutEnv); v != "" {
		cfg.LeaveOut = strings.Split(v, ",")
	}
}
