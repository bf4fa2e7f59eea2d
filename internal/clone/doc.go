// Package clone copies a running MariaDB server onto another host over the network: the
// donor takes a hot backup of its server (the same job as ferry backup, backup.Run) and
// streams it, and the recipient writes it into a staging directory beside its datadir,
// verifies it, prepares it and swaps it in, then, as asked, starts it and makes it a
// replica of the donor. The wire protocol is specified in docs/clone.md.
//
// The roles:
//   - Serve is the donor as a service (ferry serve): it listens, authenticates each
//     recipient and runs one backup per clone, whose sink (session.go) turns the backup's
//     files into frames spread over the recipient's connections, resent on a broken one
//     until acknowledged.
//   - Clone is the recipient (ferry clone): it dials the donor's Serve, or, given a
//     Listener, waits for a donor to dial it (accept.go); it receives the frames as a
//     restore.Source (source.go, recipient.go), so verification, redo apply, recovery
//     and the swap into the datadir are restore's. An interrupted clone journals what it
//     received whole (journal.go) and resumes as an incremental on it (resume.go).
//   - Donate is the donor that dials a listening recipient (a Galera SST joiner,
//     internal/sst): the same conversation with the direction of the connections
//     reversed.
//
// Both ends speak TLS 1.3 and prove a shared token bound to the TLS session, or present
// certificates (auth.go); frames (frame.go) carry a file's bytes with their CRC-32C, and
// are compressed only while the network is the bottleneck (compress.go). The throttle
// that protects the donor's server is the backup's (internal/backup, impact.go).
package clone
