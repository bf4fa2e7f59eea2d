//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-backup/ferry/internal/galera"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/ferry-backup/ferry/internal/testdb"
)

// TestGaleraSST: ferry as the SST method of a real Galera cluster on loopback (three
// nodes, and a fourth on a small tmpfs), with bank transfers on the first node all along.
//   - n2 joins by a ferry SST under the load: it reaches Synced, and the donor's
//     commits never stop for a whole second meanwhile;
//   - after a short outage n2 rejoins by IST: the method runs with --bypass and leaves
//     the datadir alone;
//   - n3 is seeded from `ferry backup` of n1 and `ferry restore --galera`, and joins by IST;
//   - n3, killed hard, gets its position from `ferry recover` and rejoins by IST;
//   - n2 joins by a full SST authenticated by certificates alone (no wsrep_sst_auth);
//   - failures of a full SST to n3 (wrong wsrep_sst_auth, another MariaDB series, the
//     donor's ferry killed, the joiner's mariadbd killed) and to n4 (a full disk): each
//     time the joiner's error log says why in one ferry line, the SST exits non-zero, the
//     donor is Synced again, the joiner's datadir is untouched, and the next start
//     succeeds with a new SST;
//   - at the end every table has the same checksum on every node, and the bank
//     invariants hold on each joiner.
func TestGaleraSST(t *testing.T) {
	small := testdb.ShortDir(t)
	mountTmpfs(t, small, "64m") // n4's 32 MiB gcache fits, a copy of n1 does not
	g := testdb.NewGalera(t, testdb.GaleraOptions{Nodes: 4, Ferry: ferryBin, Dirs: map[int]string{3: small}})
	mountTmpfs(t, g.Nodes[1].Datadir, "1g") // n2's datadir is a mount point, as on most hosts
	n1 := g.Bootstrap(t)
	bank := testdb.NewBank(t, n1.DB(t), testdb.BankOptions{Accounts: 100, NoGTID: true, Cluster: true})
	n1.Exec(t, "CREATE DATABASE filler")
	n1.Exec(t, "CREATE TABLE filler.t (id INT PRIMARY KEY, pad CHAR(240)) ENGINE=InnoDB")
	n1.Exec(t, "INSERT INTO filler.t SELECT seq, REPEAT(MD5(seq), 7) FROM filler.seq_1_to_60000")
	load := startCommitLog(t, bank)

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"n2 joins by SST under load", func(t *testing.T) { joinBySST(t, g, load) }},
		{"n2's datadir is still its mount point", func(t *testing.T) { stillMounted(t, g.Nodes[1]) }},
		{"n2 rejoins by IST", func(t *testing.T) { rejoinByIST(t, g) }},
		{"n3 seeded from a backup joins by IST", func(t *testing.T) { seedFromBackup(t, g) }},
		{"n3 crashed, recovered, rejoins by IST", func(t *testing.T) { recoverCrashed(t, g) }},
		{"wrong wsrep_sst_auth", func(t *testing.T) {
			failedSST(t, g, 2, sstFailure{want: "did not prove it knows the shared secret",
				setup: func() { g.SetSST(2, "wsrep-sst-auth=sst:not-the-secret") }})
		}},
		{"another MariaDB series", func(t *testing.T) {
			fake := writeFile(t, testdb.ShortDir(t), "mariadbd-10.6", "#!/bin/sh\necho 'mariadbd  Ver 10.6.21-MariaDB for debian-linux-gnu on x86_64'\n")
			os.Chmod(fake, 0o755)
			failedSST(t, g, 2, sstFailure{want: "but this host's", exitSeen: true, setup: func() { g.SetSST(2, "mariadbd="+fake) }})
		}},
		{"donor killed", func(t *testing.T) {
			failedSST(t, g, 2, sstFailure{want: "the donor's connections had broken", setup: func() { g.SetSST(2, "max-rate=1M") },
				during: func() { killProcess(t, sstPid(t, "donor", "")) }})
		}},
		{"joiner killed", func(t *testing.T) {
			failedSST(t, g, 2, sstFailure{want: "that started this SST is gone", setup: func() { g.SetSST(2, "max-rate=1M") },
				during: func() { g.Nodes[2].Kill(t) }})
		}},
		{"certificates instead of the secret", func(t *testing.T) { sstWithCertificates(t, g) }},
		{"full disk", func(t *testing.T) {
			failedSST(t, g, 3, sstFailure{want: "not enough free disk", exitSeen: true, repair: func() {
				if out, err := exec.Command("mount", "-o", "remount,size=1g", small).CombinedOutput(); err != nil {
					t.Fatalf("grow the tmpfs: %v %s", err, out)
				}
			}})
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { before := bank.NonPrimaryRetries(); s.run(t); load.check(t, g, bank, before) }) {
			return
		}
	}
	load.stop(t)
	for i := range g.Nodes {
		g.WaitSynced(t, i, time.Minute)
	}
	waitSameSeqno(t, g)
	want := testdb.Checksums(t, n1.DB(t))
	for i, n := range g.Nodes[1:] {
		compareChecksums(t, want, testdb.Checksums(t, n.DB(t)))
		bank.Check(t, n.DB(t), "")
		t.Logf("n%d: every table matches n1, bank invariants hold (%d transfers)", i+2, bank.Ops())
	}
	if n := bank.NonPrimaryRetries(); n > 0 {
		t.Logf("n1 was briefly outside the primary component during the node failures: %d transfers retried", n)
	}
}

// joinBySST starts n2 on an empty datadir while the load runs on n1: a full ferry SST.
func joinBySST(t *testing.T, g *testdb.Galera, load *commitLog) {
	t0 := time.Now()
	g.Join(t, 1)
	took := time.Since(t0)
	log := g.Log(t, 1)
	if !strings.Contains(log, "ferry joiner: SST complete") {
		t.Fatalf("n2 is Synced but its log shows no ferry SST:\n%s", tail(log, 30))
	}
	if !strings.Contains(log, "redo applied natively") || strings.Contains(log, fellBack) {
		t.Errorf("the joiner did not apply the SST's redo natively:\n%s", tail(log, 30))
	} else {
		parsedAsUnpacked(t, log)
	}
	zero, min := load.zeroSeconds(t0, t0.Add(took))
	if len(zero) > 0 {
		t.Errorf("the donor committed nothing in %d whole seconds of the SST (at %v)", len(zero), zero)
	}
	t.Logf("n2 joined by SST in %v; the donor's commits per second meanwhile: at least %d", took.Round(time.Millisecond), min)
}

// stillMounted checks that an SST into a datadir that is a mount point kept the mount
// and left nothing the server takes for a database (#mysql50#...).
func stillMounted(t *testing.T, n *testdb.Server) {
	if !isMountPoint(t, n.Datadir) {
		t.Fatalf("%s is no longer a mount point", n.Datadir)
	}
	var names []string
	rows, err := n.DB(t).Query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE '#mysql50#%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		names = append(names, s)
	}
	if len(names) > 0 {
		t.Errorf("the joiner's server sees %v", names)
	}
}

// rejoinByIST stops n2 cleanly for a few seconds of load and starts it again.
func rejoinByIST(t *testing.T, g *testdb.Galera) {
	g.Nodes[1].Stop(t)
	mark := len(g.Log(t, 1))
	time.Sleep(2 * time.Second)
	g.Join(t, 1)
	wantIST(t, g.Log(t, 1)[mark:], "n2")
}

// seedFromBackup backs n1 up, restores the backup into n3's empty datadir with
// --galera (grastate.dat at the backup's position) and starts n3.
func seedFromBackup(t *testing.T, g *testdb.Galera) {
	n1, n3 := g.Nodes[0], g.Nodes[2]
	bk := filepath.Join(testdb.ShortDir(t), "bk")
	mustFerry(t, "backup", "--socket", n1.Socket, "--user", "root", "--target-dir", bk)
	b, err := os.ReadFile(filepath.Join(bk, "xtrabackup_galera_info"))
	if err != nil {
		t.Fatalf("the backup of a Galera node has no xtrabackup_galera_info: %v", err)
	}
	pos, err := mariadb.ParseWsrepPosition(string(b))
	if err != nil || !pos.Known() || pos.Domain != 1 {
		t.Fatalf("xtrabackup_galera_info %q: %v (want uuid:seqno and the wsrep domain 1)", b, err)
	}
	out := mustFerry(t, "restore", "--target-dir", bk, "--datadir", n3.Datadir, "--galera")
	if !strings.Contains(out.stdout, "Galera position: "+pos.String()) {
		t.Errorf("restore does not print the backup's Galera position %s:\n%s", pos, out.stdout)
	}
	st, err := galera.ReadState(n3.Datadir)
	if err != nil || st.UUID != pos.UUID || st.Seqno != pos.Seqno || st.SafeToBootstrap {
		t.Fatalf("grastate.dat after restore --galera: %+v, %v; want %s, not safe to bootstrap", st, err, pos)
	}
	g.Join(t, 2)
	wantIST(t, g.Log(t, 2), "n3")
}

// recoverCrashed kills n3, recovers its position with ferry recover and starts it there.
func recoverCrashed(t *testing.T, g *testdb.Galera) {
	n3 := g.Nodes[2]
	time.Sleep(time.Second) // some write-sets n3 applies, so its position moves on
	n3.Kill(t)
	if st, err := galera.ReadState(n3.Datadir); err != nil || st.Seqno != -1 {
		t.Fatalf("grastate.dat of a killed node: %+v, %v; want seqno -1", st, err)
	}
	out := mustFerry(t, "recover", "--datadir", n3.Datadir, "--defaults-file", n3.ConfigFile)
	lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "--wsrep-start-position=") {
		t.Fatalf("ferry recover printed %q; want the position and a --wsrep-start-position line", out.stdout)
	}
	pos, err := mariadb.ParseWsrepPosition(lines[0])
	if err != nil || !pos.Known() {
		t.Fatalf("ferry recover printed %q: %v", lines[0], err)
	}
	mark := len(g.Log(t, 2))
	g.Join(t, 2, lines[1])
	wantIST(t, g.Log(t, 2)[mark:], "n3")
	t.Logf("recovered %s; n3 rejoined by IST", pos)
}

// wantIST checks that a node's start (its log) was an IST through ferry's --bypass.
func wantIST(t *testing.T, log, node string) {
	t.Helper()
	if !strings.Contains(log, "ferry joiner: IST: no copy needed") || strings.Contains(log, "ferry joiner: SST complete") {
		t.Fatalf("%s did not rejoin by IST through ferry's --bypass:\n%s", node, tail(log, 30))
	}
}

// sstFailure is a way a full SST fails: setup (before the joiner starts) and during
// (once the copy has started) cause it, want is in the joiner's one ferry error line,
// exitSeen says mariadbd collects the method's exit status (when the joiner fails on its
// own; when the donor fails, Galera aborts the joiner first), repair (with the [sst]
// overrides cleared) makes the next start succeed.
type sstFailure struct {
	want                  string
	exitSeen              bool
	setup, during, repair func()
}

// failedSST forces a full SST to node i (its grastate.dat removed) that fails as f
// says, and checks that the joiner's error log says why in one ferry line, that the
// donors are Synced again and the joiner's datadir untouched; then it checks that the
// next start, repaired, succeeds by SST.
func failedSST(t *testing.T, g *testdb.Galera, i int, f sstFailure) {
	n := g.Nodes[i]
	if g.Running(i) {
		n.Stop(t)
	}
	os.Remove(filepath.Join(n.Datadir, galera.StateFile))
	marker := filepath.Join(n.Datadir, "ferry-e2e-marker")
	if err := os.WriteFile(marker, []byte("the old datadir"), 0o600); err != nil {
		t.Fatal(err)
	}
	if f.setup != nil {
		f.setup()
	}
	mark := len(logOf(n))
	done := make(chan error, 1)
	go func() { done <- g.Start(i) }()
	if f.during != nil {
		waitFor(t, time.Minute, "the SST copy to start", func() bool { return strings.Contains(logOf(n)[mark:], "ferry joiner: cloning") })
		time.Sleep(time.Second)
		f.during()
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("n%d started although its SST should fail with %q", i+1, f.want)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("n%d neither started nor failed within 3 min", i+1)
	}
	// mariadbd may abort before its SST process has written its last line.
	var log string
	var errs []string
	waitFor(t, 30*time.Second, "the joiner's ferry error line", func() bool {
		log, errs = logOf(n)[mark:], nil
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "WSREP_SST: [ERROR] ferry joiner:") {
				errs = append(errs, l)
			}
		}
		return len(errs) > 0
	})
	if len(errs) != 1 || !strings.Contains(errs[0], f.want) {
		t.Errorf("the joiner's error log has %d ferry error lines %q; want one saying %q\n%s", len(errs), errs, f.want, tail(log, 30))
	}
	if f.exitSeen && !strings.Contains(log, "Process completed with error: wsrep_sst_ferry") {
		t.Errorf("mariadbd did not see the SST exit non-zero:\n%s", tail(log, 20))
	}
	for d := range g.Nodes {
		if d != i && g.Running(d) {
			g.WaitSynced(t, d, time.Minute)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the joiner's datadir lost its files after a failed SST: %v", err)
	}
	g.SetSST(i)
	if f.repair != nil {
		f.repair()
	}
	g.Join(t, i)
	if !strings.Contains(logOf(n)[mark:], "ferry joiner: SST complete") {
		t.Errorf("n%d restarted without a new SST", i+1)
	}
	t.Logf("n%d: %s", i+1, errs)
}

// sstWithCertificates gives every node a CA, a certificate and its key in [sst] and no
// wsrep_sst_auth (the donor then reads its server as its OS user through the socket), and
// makes n2 join by a full SST authenticated by the certificates alone.
func sstWithCertificates(t *testing.T, g *testdb.Galera) {
	ca, cert, key := writeTestCA(t, testdb.ShortDir(t))
	lines := []string{"wsrep-sst-auth=", "tls-ca=" + ca, "tls-cert=" + cert, "tls-key=" + key}
	for i := range g.Nodes {
		g.WriteSST(t, i, lines...)
	}
	defer func() {
		for i := range g.Nodes {
			g.WriteSST(t, i)
		}
	}()
	n2 := g.Nodes[1]
	n2.Stop(t)
	os.Remove(filepath.Join(n2.Datadir, galera.StateFile))
	mark := len(logOf(n2))
	g.Join(t, 1)
	log := logOf(n2)[mark:]
	if !strings.Contains(log, "ferry joiner: SST complete") || !strings.Contains(log, "auth=certificates") {
		t.Fatalf("n2 did not join by an SST authenticated by certificates:\n%s", tail(log, 20))
	}
}

// writeTestCA writes a CA and one certificate for 127.0.0.1 signed by it, with its key.
func writeTestCA(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferry e2e CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "galera node"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(nodeKey)
	ca = writeFile(t, dir, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	cert = writeFile(t, dir, "node.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	key = writeFile(t, dir, "node.key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	return ca, cert, key
}

// logOf is a server's error log, "" if there is none yet.
func logOf(s *testdb.Server) string {
	b, _ := os.ReadFile(s.ErrorLog)
	return string(b)
}

// waitSameSeqno waits until every node has applied the same last write-set.
func waitSameSeqno(t *testing.T, g *testdb.Galera) {
	t.Helper()
	waitFor(t, time.Minute, "every node at the same seqno", func() bool {
		var first string
		for i, n := range g.Nodes {
			v := n.QueryString(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LAST_COMMITTED'")
			if i == 0 {
				first = v
			} else if v != first {
				return false
			}
		}
		return true
	})
}

// sstPid finds the running ferry SST process of role (whose --datadir is datadir, if
// set), failing the test if there is none.
func sstPid(t *testing.T, role, datadir string) int {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, "a ferry "+role+" process", func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			args := strings.Split(string(b), "\x00")
			if len(args) > 3 && args[0] == ferryBin && args[1] == "sst" && strings.Contains(string(b), "--role\x00"+role+"\x00") &&
				(datadir == "" || strings.Contains(string(b), "\x00"+datadir)) {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

func killProcess(t *testing.T, pid int) {
	t.Helper()
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

// commitLog samples a bank's committed transfers four times a second.
type commitLog struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errc    chan error
	mu      sync.Mutex
	samples []commitSample
	err     error     // the load's error, once it stopped on one
	errAt   time.Time // when
}

type commitSample struct {
	at  time.Time
	ops int64
}

// startCommitLog runs the bank's transfers (one session) and samples them.
func startCommitLog(t *testing.T, bank *testdb.Bank) *commitLog {
	ctx, cancel := context.WithCancel(context.Background())
	c := &commitLog{cancel: cancel, errc: make(chan error, 1)}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		err := bank.Run(ctx, 1)
		c.mu.Lock()
		c.err, c.errAt = err, time.Now()
		c.mu.Unlock()
		c.errc <- err
	}()
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			c.mu.Lock()
			c.samples = append(c.samples, commitSample{time.Now(), bank.Ops()})
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); c.wg.Wait() })
	return c
}

// check fails the test (the step that ran) if the load stopped on an error, and logs
// it if the load had to retry transfers while n1 was outside the primary component
// (retries counted before the step): either way with what each node's log says of the
// cluster's membership around that moment.
func (c *commitLog) check(t *testing.T, g *testdb.Galera, bank *testdb.Bank, before int64) {
	t.Helper()
	c.mu.Lock()
	err, at := c.err, c.errAt
	c.mu.Unlock()
	if err != nil {
		t.Fatalf("bank load stopped at %s: %v\n%s", at.Format("15:04:05.000"), err, viewLines(g, at.Add(-20*time.Second), at.Add(time.Second)))
	}
	if n := bank.NonPrimaryRetries() - before; n > 0 {
		t.Logf("n1 left the primary component during this step: %d transfers retried; the cluster's view changes in the last minute:\n%s",
			n, viewLines(g, time.Now().Add(-time.Minute), time.Now()))
	}
}

// viewLines are the lines of every node's error log between from and to about the
// cluster's membership, state or SSTs.
func viewLines(g *testdb.Galera, from, to time.Time) string {
	var b strings.Builder
	for i, n := range g.Nodes {
		fmt.Fprintf(&b, "--- n%d ---\n", i+1)
		for _, l := range strings.Split(logOf(n), "\n") {
			ts, err := time.ParseInLocation("2006-01-02 15:04:05", firstN(l, 19), time.Local)
			if err == nil && !ts.Before(from.Truncate(time.Second)) && !ts.After(to) && isViewLine(l) {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// isViewLine reports a log line about Galera membership, state or SST.
func isViewLine(l string) bool {
	for _, k := range []string{"view", "View", "suspect", "partition", "Primary", "state change", "SST", "timed out", "inactive", "declaring", "forgetting"} {
		if strings.Contains(l, k) {
			return true
		}
	}
	return false
}

func firstN(s string, n int) string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

// stop ends the load and fails the test if it failed.
func (c *commitLog) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	c.wg.Wait()
	if err := <-c.errc; err != nil {
		t.Fatalf("bank load: %v", err)
	}
}

// zeroSeconds are the starts of the whole seconds in [from, to] in which nothing was
// committed; min is the fewest commits in any of them.
func (c *commitLog) zeroSeconds(from, to time.Time) ([]string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := func(t time.Time) int64 { // commits counted by the last sample at or before t
		var n int64
		for _, s := range c.samples {
			if s.at.After(t) {
				break
			}
			n = s.ops
		}
		return n
	}
	var zero []string
	min := int64(-1)
	for s := from; !s.Add(time.Second).After(to); s = s.Add(time.Second) {
		n := at(s.Add(time.Second)) - at(s)
		if min < 0 || n < min {
			min = n
		}
		if n == 0 {
			zero = append(zero, fmt.Sprintf("+%.0fs", s.Sub(from).Seconds()))
		}
	}
	return zero, min
}
