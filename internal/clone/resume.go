package clone

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/ferry-backup/ferry/internal/backup"
	"github.com/ferry-backup/ferry/internal/manifest"
	"github.com/ferry-backup/ferry/internal/safepath"
)

// maxResumedFiles bounds the files a resume offer may list.
const maxResumedFiles = 1 << 20

// resumeBase is the incremental's base for a recipient's resume offer: its interrupted
// copy, exact for every page whose LSN is at most the copy's start, in the files it
// holds whole. The backup refuses it if it is not of this server (server_uid, an LSN
// past the server's).
func (d *donor) resumeBase(o *resumeOffer) (*backup.Base, error) {
	switch {
	case o.StartLSN == 0:
		return nil, fmt.Errorf("%w: a resume offer without the interrupted copy's start LSN", errProtocol)
	case len(o.Files) > maxResumedFiles:
		return nil, fmt.Errorf("%w: a resume offer of %d files (at most %d)", errProtocol, len(o.Files), maxResumedFiles)
	case d.info.uid != "" && o.ServerUID != d.info.uid:
		return nil, fmt.Errorf("the recipient's interrupted clone is of another server (server_uid %s, this one is %s): clone whole instead", o.ServerUID, d.info.uid)
	}
	b := &backup.Base{Name: "the recipient's interrupted clone", ToLSN: o.StartLSN, FromLSN: o.StartLSN, UID: o.ServerUID,
		Spaces: map[uint32]manifest.Space{}, Have: map[string]manifest.Space{}}
	for _, f := range o.Files {
		b.Have[f.Path] = f.Space
		if !f.Space.System {
			b.Spaces[f.Space.ID] = f.Space
		}
	}
	return b, nil
}

// decideResume says what of the interrupted clone in staging (its journal read back
// as st) can be resumed from the donor that sent w: the offer, or nil and why the clone
// starts over instead.
func decideResume(st *journalState, w welcome, staging string) (*resumeOffer, string) {
	switch {
	case st == nil || st.startLSN == 0:
		return nil, "the staging directory records no tablespace received whole"
	case st.phases[phaseApplying]:
		return nil, "the last run stopped while applying a resumed copy onto it"
	case st.phases[phaseFilled]:
		return nil, "the interrupted clone had been received whole, and its recovery may have changed it"
	case !w.Resume:
		return nil, "the donor's ferry cannot resume a clone (upgrade it)"
	case w.ServerUID == "" || w.ServerUID != st.serverUID:
		return nil, fmt.Sprintf("the interrupted clone is of another server (server_uid %q, the donor's is %q)", st.serverUID, w.ServerUID)
	case st.donor != donorOf(w):
		return nil, fmt.Sprintf("the interrupted clone is of another server (%s, the donor is %s)", st.donor, donorOf(w))
	case w.LSN != 0 && st.startLSN > w.LSN:
		return nil, fmt.Sprintf("the interrupted clone began at LSN %d, past the donor's current LSN %d: the donor was restored since", st.startLSN, w.LSN)
	}
	o := &resumeOffer{ServerUID: st.serverUID, StartLSN: st.startLSN}
	for _, p := range slices.Sorted(maps.Keys(st.files)) {
		l := st.files[p]
		if why := systemReplaced(l, w); why != "" {
			return nil, why
		}
		full, err := safepath.Join(staging, p)
		if err != nil {
			continue
		}
		if fi, err := os.Lstat(full); err != nil || !fi.Mode().IsRegular() || fi.Size() < l.Size {
			continue // gone or cut short since: sent whole
		}
		o.Files = append(o.Files, resumedFile{Path: p, Size: l.Size, Space: *l.Space})
	}
	if len(o.Files) == 0 {
		return nil, "none of the tablespaces it received whole is left"
	}
	return o, ""
}

// bytes is what the offered files hold.
func (o *resumeOffer) bytes() int64 {
	var n int64
	for _, f := range o.Files {
		n += f.Size
	}
	return n
}

// systemReplaced says why the donor's system tablespace file journaled in l is not
// the one the interrupted clone copied ("" if it is, or cannot be told).
func systemReplaced(l journalLine, w welcome) string {
	if !l.Space.System || l.Space.Identity == nil {
		return ""
	}
	now, ok := w.System[l.Done]
	was := l.Space.Identity
	if ok && (now.Inode != was.Inode || now.BirthNS != 0 && was.BirthNS != 0 && now.BirthNS != was.BirthNS) {
		return fmt.Sprintf("the donor's %s is another file than the interrupted clone copied (restored or re-created since)", l.Done)
	}
	return ""
}
