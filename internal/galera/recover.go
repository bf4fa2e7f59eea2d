package galera

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/setting"
)

// RecoverConfig says which node's position to recover.
type RecoverConfig struct {
	Datadir      string
	DefaultsFile string // the node's my.cnf ("" for the host's usual option files)
	Mariadbd     string // default found on PATH or /usr/sbin
	Timeout      time.Duration
}

// Recovered is a node's position as its InnoDB data records it.
type Recovered struct {
	Position mariadb.WsrepPosition
	// StartPosition is what mariadbd printed, for --wsrep-start-position (with
	// wsrep_gtid_mode it also carries the GTID: "uuid:seqno,domain-server-seqno").
	StartPosition string
}

var recoveredRe = regexp.MustCompile(`WSREP: Recovered position:\s*(\S+)`)

// maxRecoverLog bounds how much of the recovery's error log is read.
const maxRecoverLog = 4 << 20

// Recover runs the node's stock mariadbd with --wsrep-recover on its (stopped)
// datadir, as Debian's galera_recovery does: InnoDB crash recovery runs, the wsrep
// position stored with the last committed transaction is printed, and the server
// exits. A node killed hard has "seqno: -1" in grastate.dat; started with
// --wsrep-start-position at the recovered position, it rejoins by IST instead of a
// full SST.
func Recover(ctx context.Context, cfg RecoverConfig) (Recovered, error) {
	datadir, err := filepath.Abs(cfg.Datadir)
	if err != nil || cfg.Datadir == "" {
		return Recovered{}, setting.Errorf("%s is required", setting.Datadir)
	}
	if _, err := os.Stat(filepath.Join(datadir, "ibdata1")); err != nil {
		return Recovered{}, fmt.Errorf("%s is not a datadir (no ibdata1): %w", datadir, err)
	}
	if mariadb.DatadirInUse(datadir) {
		return Recovered{}, fmt.Errorf("datadir %s is in use by a running server: a running node's position is wsrep_last_committed; recover only a stopped node", datadir)
	}
	bin, err := mariadb.FindMysqld(cfg.Mariadbd)
	if err != nil {
		return Recovered{}, err
	}
	run, err := os.MkdirTemp("", "ferry-recover-")
	if err != nil {
		return Recovered{}, err
	}
	defer os.RemoveAll(run)
	var args []string
	if cfg.DefaultsFile != "" {
		args = append(args, "--defaults-file="+cfg.DefaultsFile)
	}
	errLog := filepath.Join(run, "recover.err")
	args = append(args, "--datadir="+datadir, "--wsrep-recover", "--log-error="+errLog, "--skip-networking", "--skip-ssl",
		"--socket="+filepath.Join(run, "s.sock"), "--pid-file="+filepath.Join(run, "m.pid"))
	if os.Geteuid() == 0 {
		args = append(args, "--user="+ownerName(datadir))
		if err := chownLike(run, datadir); err != nil { // the server writes its log and socket there
			return Recovered{}, err
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	out, runErr := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	log := readLog(errLog) + string(out)
	if m := recoveredRe.FindStringSubmatch(log); m != nil {
		p, err := mariadb.ParseWsrepPosition(m[1])
		if err != nil {
			return Recovered{}, fmt.Errorf("mariadbd --wsrep-recover printed %w", err)
		}
		if !p.Known() {
			return Recovered{}, fmt.Errorf("the datadir records no Galera position (%s): it is not a Galera node's, or the node never committed a write-set; it needs a full SST", m[1])
		}
		return Recovered{Position: p, StartPosition: m[1]}, nil
	}
	if strings.Contains(log, "skipping position recovery") {
		return Recovered{}, setting.Errorf("wsrep is off in this node's settings: mariadbd skipped position recovery; pass the node's my.cnf with %s", setting.DefaultsFile)
	}
	return Recovered{}, fmt.Errorf("mariadbd --wsrep-recover printed no position (%v): %s", runErr, lastLines(log, 5))
}

// chownLike gives dir the owner of like.
func chownLike(dir, like string) error {
	fi, err := os.Stat(like)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Chown(dir, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("give the recovery's run directory to the datadir's owner: %w", err)
	}
	return nil
}

// ownerName is the user owning dir, for mariadbd --user when run as root.
func ownerName(dir string) string {
	if u := mariadb.OwnerName(dir); u != "" {
		return u
	}
	return "mysql"
}

func readLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxRecoverLog))
	return string(b)
}

// lastLines is the end of a log, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
