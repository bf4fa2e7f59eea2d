package clone

import "github.com/ferry-backup/ferry/internal/manifest"

// protocolVersion is the version of the clone protocol (docs/clone.md); both ends must
// speak the same.
const protocolVersion = 2

// hello is the recipient's first message on every connection.
type hello struct {
	Protocol int    `json:"protocol"`
	Ferry    string `json:"ferry"`
	Proof    string `json:"proof,omitempty"`   // token proof (role "recipient")
	Session  string `json:"session,omitempty"` // join this running clone (another stream, or a reconnect)
	// Options of a new clone.
	Compress  string  `json:"compress,omitempty"`
	MaxRate   int64   `json:"max_rate,omitempty"`
	MaxImpact float64 `json:"max_impact,omitempty"`
	// Streams is how many connections the recipient wants; a donor that dials the
	// recipient (a Galera SST donor) opens that many.
	Streams int `json:"streams,omitempty"`
}

// welcome is the donor's answer to an accepted hello.
type welcome struct {
	Proof         string `json:"proof,omitempty"` // token proof (role "donor")
	Session       string `json:"session"`
	Ferry         string `json:"ferry"`
	ServerVersion string `json:"server_version"`
	// Family is the donor server's family: "" for MariaDB, "mysql" for MySQL.
	Family   string `json:"family,omitempty"`
	ServerID uint32 `json:"server_id"`
	Port     int    `json:"port"`
	Host     string `json:"host"`
	Datadir  string `json:"datadir"`
	Estimate int64  `json:"estimate_bytes"` // bytes the copy will write on the recipient (roughly)
	// ServerUID is the donor's @@server_uid: a recipient resumes only a clone of the
	// same server.
	ServerUID string `json:"server_uid,omitempty"`
	// Resume: the donor can complete an interrupted clone (start's resume).
	Resume bool `json:"resume,omitempty"`
	// LSN is the server's current LSN (0: unknown): an interrupted clone that began
	// past it is of another history of the server (restored since), not resumed.
	LSN uint64 `json:"lsn,omitempty"`
	// System identifies the donor's system tablespace files (ibdata*, by path in the
	// datadir): an interrupted clone whose copy of one is another file is not resumed.
	System map[string]fileID `json:"system,omitempty"`
	// Bypass, if set, means the donor sends no copy: this is all it has to say (a
	// Galera donor whose joiner gets the write-sets by IST sends the joiner's position).
	Bypass string `json:"bypass,omitempty"`
}

// fileID is a file's identity: its inode and birth time (Unix nanoseconds, 0 if the
// filesystem keeps none).
type fileID struct {
	Inode   uint64 `json:"inode"`
	BirthNS int64  `json:"birth_ns,omitempty"`
}

// start tells the donor the recipient's checks passed (or not: Abort says why).
type start struct {
	Abort string `json:"abort,omitempty"`
	// Resume, if set, asks for an incremental on the interrupted clone the recipient
	// holds instead of a whole copy (docs/clone.md, "Resuming a clone").
	Resume *resumeOffer `json:"resume,omitempty"`
}

// resumeOffer is what an interrupted clone left on the recipient: the donor sends the
// pages changed since StartLSN of the files listed, and every other file whole.
type resumeOffer struct {
	ServerUID string `json:"server_uid"`
	// StartLSN is the interrupted copy's start: the checkpoint its redo copy began at.
	StartLSN uint64        `json:"start_lsn"`
	Files    []resumedFile `json:"files"`
}

// resumedFile is a tablespace file the interrupted clone received whole.
type resumedFile struct {
	Path  string         `json:"path"`
	Size  int64          `json:"size"`
	Space manifest.Space `json:"space"`
}

// closeInfo is the JSON payload of a close frame of an InnoDB tablespace file: where
// the copy's redo began, and the tablespace as the copy read it; the recipient
// journals it so that an interrupted clone can be resumed. Older recipients ignore it.
type closeInfo struct {
	StartLSN uint64          `json:"start_lsn"`
	Space    *manifest.Space `json:"space"`
}

// Proof roles.
const (
	roleRecipient = "ferry clone recipient"
	roleDonor     = "ferry clone donor"
	// roleKnock is a dialling donor's first proof: the side that dials proves first, so a
	// listening recipient gives a stranger nothing to attack offline.
	roleKnock = "ferry clone donor knock"
)

// knock is the first message of a donor that dialled a listening recipient.
type knock struct {
	Proof string `json:"proof,omitempty"`
}
