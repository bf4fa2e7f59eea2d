package main

import (
	"fmt"
	"github.com/ferry-backup/ferry/internal/mysql"
	"io"
	"os"
	"strings"

	"github.com/ferry-backup/ferry/internal/clone"
	"github.com/ferry-backup/ferry/internal/defaults"
	"github.com/ferry-backup/ferry/internal/mariadb"
	"github.com/spf13/cobra"
)

func newCloneCmd(g *globals) *cobra.Command {
	var cfg clone.Config
	var sf securityFlags
	var impact float64
	var replPwFile string
	var dirMaps []string
	var jm jobMetrics
	cmd := &cobra.Command{
		Use:   "clone --from HOST:PORT (--token-file F | --tls-ca CA) --datadir DATADIR [--start [--replicate --repl-user U --repl-password-file F]]",
		Short: "Clone a running server (ferry serve on it) into a local datadir, optionally start it as a replica",
		Example: `  ferry clone --from db1:4444 --token-file /etc/ferry/token --datadir /var/lib/mysql \
      --start --replicate --repl-user repl --repl-password-file /etc/ferry/repl.pw
  The copy is built in a staging directory beside the datadir and swapped in at the end;
  a non-empty datadir needs --replace and is kept (DATADIR.ferry-old-TIME). With --start
  the local mariadbd (its my.cnf, or --defaults-file) is started on the clone; if it does
  not start, the old datadir is put back. Without --start the replication commands are printed.`,
		Args: cobra.NoArgs,
		RunE: jm.wrap("clone", g, func(cmd *cobra.Command, _ []string) error {
			sec, err := sf.resolve()
			if err != nil {
				return err
			}
			limitRecoveryMemory(cfg.UseMemory, 0)
			if _, err := clone.ParseCompress(cfg.Compress); err != nil {
				return err
			}
			if err := parseDirMaps(&cfg.DataDirs, dirMaps); err != nil {
				return err
			}
			if replPwFile != "" {
				b, err := os.ReadFile(replPwFile)
				if err != nil {
					return fmt.Errorf("read --repl-password-file: %w", err)
				}
				cfg.Repl.Password = strings.TrimRight(string(b), "\r\n")
			}
			cfg.Security, cfg.MaxImpact, cfg.Version = sec, impact/100, version
			cfg.Log, cfg.Progress, cfg.Terminal = g.log, os.Stderr, g.barOnStderr()
			cfg.Local.DefaultsFile = cfg.DefaultsFile
			res, err := clone.Clone(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			printClone(cmd.OutOrStdout(), res)
			return nil
		}),
	}
	f := cmd.Flags()
	jm.addFile(f)
	sf.add(f, "this host")
	f.StringVar(&cfg.From, "from", "", "the donor's ferry serve, host:port")
	f.StringVar(&sf.sec.ServerName, "tls-server-name", "", "name the donor's certificate must carry (default: the host of --from)")
	f.StringVar(&cfg.Datadir, "datadir", "", "datadir to clone into (new, empty, or with --replace)")
	f.BoolVar(&cfg.Replace, "replace", false, "move a non-empty datadir aside (kept as DATADIR.ferry-old-TIME) and clone in its place")
	f.BoolVar(&cfg.Resume, "resume", false, "continue the interrupted clone into this datadir: of the tablespaces it received whole, the donor sends only the pages changed since")
	f.StringVar(&cfg.Owner, "owner", "", "user[:group] owning the files when run as root (default: the existing datadir's owner unless root, else the mysql user, else the parent's owner)")
	f.IntVar(&cfg.Streams, "streams", defaults.CloneStreams, "parallel TCP connections")
	f.StringVar(&cfg.Compress, "compress", clone.CompressAuto, "auto (compress only while the network is the bottleneck), none, lz4 or zstd")
	f.Var(byteSize{&cfg.MaxRate}, "max-rate", "cap on the bytes per second the donor sends, e.g. 50M (default unlimited)")
	f.Float64Var(&impact, "max-impact", 0, "percent of the donor's write throughput the clone may cost (the donor's own --max-impact wins if lower)")
	f.BoolVar(&cfg.Start, "start", false, "start mariadbd on the clone and wait until it accepts connections")
	f.BoolVar(&cfg.Replicate, "replicate", false, "with --start: make the clone a replica of the donor from the copy's GTID position and wait until it runs")
	f.BoolVar(&cfg.FromSource, "replicate-from-source", false, "the donor is a replica: replicate from its source at the donor's gtid_slave_pos instead of from the donor (with --replicate, or in the printed commands)")
	f.StringVar(&cfg.DefaultsFile, "defaults-file", "", "my.cnf of the local server for --start (default: the host's usual option files); its [client] group also gives the connection")
	f.StringVar(&cfg.Local.Socket, "socket", "", "socket of the started server (default: from its options)")
	f.StringVarP(&cfg.Local.User, "user", "u", "", "user for the started server (default root); the clone has the donor's accounts")
	f.StringVar(&cfg.Local.PasswordFile, "password-file", "", "file with that user's password")
	f.StringVar(&cfg.Repl.User, "repl-user", "", "replication user on the donor")
	f.StringVar(&replPwFile, "repl-password-file", "", "file holding the replication user's password")
	f.StringVar(&cfg.Repl.Host, "repl-host", "", "primary host for CHANGE MASTER (default: the host of --from)")
	f.IntVar(&cfg.Repl.Port, "repl-port", 0, "primary port (default: the donor server's port)")
	f.StringVar(&cfg.Mariadbd, "mariadbd", "", mariadbdHelp)
	f.StringVar(&cfg.UseMemory, "use-memory", "256M", "memory for recovery of the copy: ferry's redo apply batch, or the stock server's buffer pool")
	addRecoveryFlag(f, &cfg.Recovery)
	addKeyFlags(f, &cfg.Keys)
	f.StringArrayVar(&dirMaps, "data-directory-map", nil, "OLD=NEW: put DATA DIRECTORY tablespaces that were under OLD under NEW instead (repeatable; default: their original paths, which must be free)")
	f.BoolVar(&cfg.DataDirs.Inside, "no-data-directory", false, "put DATA DIRECTORY tablespaces inside the datadir as ordinary tablespaces")
	f.DurationVar(&cfg.Grace, "reconnect-wait", defaults.CloneGrace, "how long to keep reconnecting a broken stream")
	cmd.MarkFlagRequired("from")
	cmd.MarkFlagRequired("datadir")
	return cmd
}

// printClone tells what was done and, where ferry did not do it, the exact commands.
func printClone(w io.Writer, res *clone.Result) {
	fmt.Fprintf(w, "Cloned %s into %s%s. GTID position: %s\n", res.Donor, res.Datadir, ownedBy(res.Owner), res.Replica.GTID)
	if res.MovedAside != "" {
		fmt.Fprintf(w, "The previous datadir is kept in %s.\n", res.MovedAside)
	}
	server, how := "mariadbd", "MASTER_USE_GTID=slave_pos"
	if res.MySQL {
		server, how = "mysqld", "SOURCE_AUTO_POSITION=1"
	}
	if res.Server == nil {
		fmt.Fprintf(w, "Start it with: %s (or your service manager with these options)\n", startCommand(server, res.Datadir, res.Options))
	} else {
		fmt.Fprintf(w, "%s is running on it (pid %d).\n", server, res.Server.Pid)
	}
	if res.Replicating {
		fmt.Fprintf(w, "Replicating from %s:%d (%s).\n", res.Replica.Host, res.Replica.Port, how)
		return
	}
	r := res.Replica
	user := r.User
	if user == "" {
		user = "<repl user>"
	}
	fmt.Fprintf(w, "To make it a replica of %s:%d, run on it:\n", r.Host, r.Port)
	if res.MySQL {
		printStatements(w, mysql.ReplicaSetup(res.Version, r.GTID, mysql.Source{Host: r.Host, Port: r.Port, User: user, Password: "<password>"}))
		return
	}
	printStatements(w, mariadb.ReplicaSetup(r.GTID, mariadb.ChangeMaster{Host: r.Host, Port: r.Port, User: user, Password: "<password>", UseGTID: "slave_pos"}))
}
