package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GaleraProvider is where Debian's galera-4 package puts the provider.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// GaleraOptions configures NewGalera.
type GaleraOptions struct {
	Nodes int      // nodes configured; 0 means 3
	Ferry string   // the ferry binary mariadbd runs as its SST method (wsrep_sst_ferry)
	Auth  string   // wsrep_sst_auth, and the SST user created on bootstrap; "" means "sst:sst-secret-1"
	SST   []string // [sst] lines of every node
	// Dirs are the directories to put some nodes' files in, by node index (a small
	// tmpfs, say); the others get a temp dir.
	Dirs map[int]string
	// Basedir runs the nodes from another MariaDB's installation (Options.Basedir).
	Basedir string
}

// Galera is a cluster of private mariadbd nodes on loopback, each with its own client,
// group communication, IST and SST ports on 127.0.0.1, whose SST method is ferry.
// NewGalera only configures them: Bootstrap starts the first, Start the others.
type Galera struct {
	Nodes []*Server
	opt   GaleraOptions
	shim  string
	ports []galeraPorts
	sst   [][]string // each node's own [sst] lines
}

type galeraPorts struct{ gcomm, ist, sst int }

// NewGalera configures opt.Nodes nodes: the first has an installed datadir, the others
// an empty one (a new node gets everything by SST).
func NewGalera(t testing.TB, opt GaleraOptions) *Galera {
	t.Helper()
	needServers(t, "a Galera cluster")
	if _, err := os.Stat(GaleraProvider); err != nil {
		t.Fatalf("galera-4 is not installed (%v): .ci/run installs it", err)
	}
	if opt.Nodes == 0 {
		opt.Nodes = 3
	}
	if opt.Auth == "" {
		opt.Auth = "sst:sst-secret-1"
	}
	g := &Galera{opt: opt, shim: ShortDir(t), sst: make([][]string, opt.Nodes)}
	shim := fmt.Sprintf("#!/bin/sh\nexec %q sst \"$@\"\n", opt.Ferry)
	if err := os.WriteFile(filepath.Join(g.shim, "wsrep_sst_ferry"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	for range opt.Nodes {
		g.ports = append(g.ports, galeraPorts{gcomm: freePort(t), ist: freePort(t), sst: freePort(t)})
	}
	for i := range opt.Nodes {
		base, ok := opt.Dirs[i]
		if !ok {
			base = ShortDir(t)
		}
		datadir := filepath.Join(base, "data")
		if i == 0 {
			installDB(t, datadir, opt.Basedir, nil)
		} else if err := os.Mkdir(datadir, 0o750); err != nil {
			t.Fatal(err)
		}
		s := &Server{opt: Options{Datadir: datadir, ServerID: 1, LogFileSize: "16M", Basedir: opt.Basedir}, base: base, Datadir: datadir,
			Socket: filepath.Join(base, "mysql.sock"), PidFile: filepath.Join(base, "mariadbd.pid"),
			ErrorLog: filepath.Join(base, "error.log"), ConfigFile: filepath.Join(base, "my.cnf"), Port: freePort(t)}
		t.Cleanup(func() { s.cleanup(t) })
		g.Nodes = append(g.Nodes, s)
	}
	return g
}

// SetSST sets node i's own [sst] lines (besides the cluster's), for its next start.
func (g *Galera) SetSST(i int, lines ...string) { g.sst[i] = lines }

// WriteSST sets node i's own [sst] lines and rewrites its my.cnf now: the SST method
// reads [sst] when it runs, so a running node's next SST (as donor or joiner) takes them.
func (g *Galera) WriteSST(t testing.TB, i int, lines ...string) {
	t.Helper()
	g.sst[i] = lines
	args := g.Nodes[i].opt.Args
	g.configure(i, false)
	g.Nodes[i].opt.Args = args
	if err := os.WriteFile(g.Nodes[i].ConfigFile, []byte(g.Nodes[i].config()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// configure renders node i's options for its next start.
func (g *Galera) configure(i int, bootstrap bool) {
	var addrs []string
	for _, p := range g.ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p.gcomm))
	}
	p := g.ports[i]
	lines := []string{
		"wsrep_on=ON", "wsrep_provider=" + GaleraProvider, "wsrep_cluster_name=ferry-e2e",
		"wsrep_cluster_address=gcomm://" + strings.Join(addrs, ","),
		fmt.Sprintf("wsrep_node_name=n%d", i+1), fmt.Sprintf("wsrep_node_address=127.0.0.1:%d", p.gcomm),
		fmt.Sprintf(`wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M"`, p.gcomm, p.ist),
		fmt.Sprintf("wsrep_sst_receive_address=127.0.0.1:%d", p.sst),
		"wsrep_sst_method=ferry", "wsrep_gtid_mode=ON", "wsrep_gtid_domain_id=1", fmt.Sprintf("gtid_domain_id=%d", 11+i),
		"log-slave-updates=ON", "innodb_autoinc_lock_mode=2", "innodb_flush_log_at_trx_commit=2", "wsrep_slave_threads=2",
		"[sst]", "wsrep-sst-auth=" + g.opt.Auth, "reconnect-wait=5",
	}
	s := g.Nodes[i]
	s.opt.Config = append(append(lines, g.opt.SST...), g.sst[i]...)
	s.opt.Env = []string{"PATH=" + g.shim + ":" + os.Getenv("PATH")}
	s.opt.Args = nil
	if bootstrap {
		s.opt.Args = []string{"--wsrep-new-cluster"}
	}
}

// Bootstrap starts the first node as a new cluster and creates the SST user.
func (g *Galera) Bootstrap(t testing.TB) *Server {
	t.Helper()
	g.configure(0, true)
	s := g.Nodes[0]
	if err := s.launch(); err != nil {
		t.Fatalf("bootstrap the cluster on %s: %v\n%s", s.Datadir, err, s.logTail(30))
	}
	g.WaitSynced(t, 0, time.Minute)
	user, pass, _ := strings.Cut(g.opt.Auth, ":")
	s.Exec(t, fmt.Sprintf("CREATE USER '%s'@'localhost' IDENTIFIED BY '%s'", user, pass))
	s.Exec(t, fmt.Sprintf("GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR ON *.* TO '%s'@'localhost'", user))
	return s
}

// Start starts node i (extra are mariadbd options for this start only) and returns
// once it accepts connections, or the error of a start that failed (an SST that
// failed makes mariadbd abort).
func (g *Galera) Start(i int, extra ...string) error {
	g.configure(i, false)
	s := g.Nodes[i]
	s.opt.Args = extra
	return s.launch()
}

// Join starts node i and waits until it is Synced, failing the test otherwise.
func (g *Galera) Join(t testing.TB, i int, extra ...string) {
	t.Helper()
	if err := g.Start(i, extra...); err != nil {
		t.Fatalf("node n%d did not start: %v\n%s", i+1, err, g.Nodes[i].logTail(30))
	}
	g.WaitSynced(t, i, 3*time.Minute)
}

// State is node i's wsrep_local_state_comment ("" if it does not answer).
func (g *Galera) State(i int) string {
	db, err := sql.Open("mysql", g.Nodes[i].DSN(""))
	if err != nil {
		return ""
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, _ := queryString(ctx, db, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'")
	return v
}

// WaitSynced waits until node i is Synced.
func (g *Galera) WaitSynced(t testing.TB, i int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := g.State(i)
		if st == "Synced" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node n%d is %q, not Synced, after %v\n%s", i+1, st, timeout, g.Nodes[i].logTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Running tells whether node i's mariadbd runs.
func (g *Galera) Running(i int) bool { return g.Nodes[i].running() }

// WaitExit waits until node i's mariadbd has exited (a joiner aborting after a failed
// SST), failing the test after timeout.
func (g *Galera) WaitExit(t testing.TB, i int, timeout time.Duration) {
	t.Helper()
	s := g.Nodes[i]
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(timeout):
		t.Fatalf("node n%d still runs %v after its SST should have failed\n%s", i+1, timeout, s.logTail(30))
	}
}

// Log is node i's error log.
func (g *Galera) Log(t testing.TB, i int) string {
	t.Helper()
	b, err := os.ReadFile(g.Nodes[i].ErrorLog)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
