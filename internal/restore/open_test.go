package restore

import (
	"strings"
	"testing"
)

func TestCheckMariadbdSeries(t *testing.T) {
	b := &Backup{Dir: "/b", ServerVersion: "10.11.19-MariaDB-0+deb12u1-log"}
	if err := b.CheckMariadbd("/usr/sbin/mariadbd", "10.11.21"); err != nil {
		t.Fatalf("same series, newer patch: %v", err)
	}
	err := b.CheckMariadbd("/opt/mariadbd", "11.4.3")
	if err == nil || !strings.Contains(cliText(err), "install mariadb-server 10.11, pass --mariadbd (a binary or an installation directory) or name it in the option files (mariadbd-10.11=)") {
		t.Fatalf("other series: %v", err)
	}
	if err := (&Backup{Dir: "/b"}).CheckMariadbd("x", "10.11.19"); err == nil {
		t.Fatal("a backup without a server version must be refused")
	}
}
