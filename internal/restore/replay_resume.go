package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-backup/ferry/internal/binlog"
)

// A point-in-time replay cut short by an interruption (SIGINT, SIGTERM) is continued
// by --resume where it stopped: the applier is stopped cleanly (STOP SLAVE stops the
// parallel applier at a transaction boundary, every earlier transaction committed),
// the server shut down, and the replica's position (relay-log.info, master.info) kept
// with the relay logs in the staging directory. The resumed run starts the server on
// the same relay logs and position and only starts the applier again: no transaction
// is applied twice or skipped. A replay that ended any other way (a crash, a kill, an
// applier error) is started over from the backup (startOverAfterReplay).

// relayDirName is the directory inside the staging directory that holds the replay's
// relay logs and the replica's position files. Its name starts with ".", which the
// server never takes for a database; it is removed once the replay is done.
const relayDirName = ".ferry-relay"

// replayPhase names the plan a replay applies (the backup's position and the end), so
// that a resumed run continues only the same replay.
func replayPhase(p *binlog.Plan) string {
	return phaseReplaying + " " + p.From.String() + " " + p.Until.String()
}

// resumedReplay tells whether the copy in staging holds a replay stopped cleanly (the
// journal's last phases are "replaying ..." then "replay-stopped"), and which.
func resumedReplay(staging string) (string, bool) {
	phases := readPhases(staging)
	n := len(phases)
	if n < 2 || phases[n-1] != phaseReplayStopped || !strings.HasPrefix(phases[n-2], phaseReplaying) {
		return "", false
	}
	return phases[n-2], true
}

// relayIn returns p with its relay logs in staging's relay directory: moved there from
// where the plan wrote them, or, for a resumed replay, those an earlier run moved (the
// same files: the plan is the same).
func relayIn(staging string, p *binlog.Plan, resumed bool) (*binlog.Plan, error) {
	dir := filepath.Join(staging, relayDirName)
	q := *p
	q.RelayFiles = nil
	for _, f := range p.RelayFiles {
		q.RelayFiles = append(q.RelayFiles, filepath.Join(dir, filepath.Base(f)))
	}
	q.RelayIndex = filepath.Join(dir, filepath.Base(p.RelayIndex))
	if resumed {
		for _, f := range append(q.RelayFiles, q.RelayIndex) {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("resume the replay: %w", err)
			}
		}
		return &q, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	for i, f := range p.RelayFiles {
		if err := moveFile(f, q.RelayFiles[i]); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	if err := os.WriteFile(q.RelayIndex, []byte(strings.Join(q.RelayFiles, "\n")+"\n"), 0o640); err != nil {
		return nil, fmt.Errorf("replay: relay log index: %w", err)
	}
	return &q, nil
}

// stopReplay stops the applier of an interrupted replay at a transaction boundary,
// shuts the server down cleanly and records that the replay can go on from there. If
// any of it fails, nothing is recorded: a resumed run starts the replay over.
func stopReplay(ctx context.Context, srv PrivateServer, staging string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_, err := srv.DB().ExecContext(ctx, "STOP SLAVE SQL_THREAD")
	if serr := srv.Shutdown(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("stop the replay: %w", err)
	}
	return addPhase(staging, phaseReplayStopped)
}
