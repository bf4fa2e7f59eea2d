package mariadb

import "testing"

func TestParseWsrepPosition(t *testing.T) {
	const u = "212ac2f8-e8d6-11f1-a595-4715affe5663"
	for in, want := range map[string]WsrepPosition{
		u + ":8":        {UUID: u, Seqno: 8},
		u + ":8 1\n":    {UUID: u, Seqno: 8, Domain: 1},
		u + ":14,1-1-8": {UUID: u, Seqno: 14},
		"212AC2F8-E8D6-11F1-A595-4715AFFE5663:-1": {UUID: u, Seqno: -1},
	} {
		got, err := ParseWsrepPosition(in)
		if err != nil || got != want {
			t.Errorf("ParseWsrepPosition(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", u, u + ":", u + ":-2", u + ":x", "not-a-uuid:5", u + ":5 d", u + ":5 99999999999"} {
		if _, err := ParseWsrepPosition(bad); err == nil {
			t.Errorf("ParseWsrepPosition(%q) accepted", bad)
		}
	}
	p := WsrepPosition{UUID: u, Seqno: 8, Domain: 1}
	if p.Line() != u+":8 1" || p.String() != u+":8" || !p.Known() || (WsrepPosition{UUID: NilUUID, Seqno: 3}).Known() {
		t.Fatalf("formatting: %q %q", p.Line(), p.String())
	}
}
