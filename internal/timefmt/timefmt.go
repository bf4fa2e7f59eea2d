// Package timefmt is how ferry shows and reads a point in time: every time it prints
// carries its UTC offset (in the host's zone by default), and every time it is given
// may carry an offset or a zone name; one without either is in the host's zone. A time
// ferry printed means the same instant when it is read back.
package timefmt

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // zone names work on hosts without a zoneinfo database
)

// Layout is how ferry prints a time: to the second, with the UTC offset.
const Layout = "2006-01-02 15:04:05 -07:00"

// maxInput bounds the length of a time to parse.
const maxInput = 80

// Format prints t in the host's zone (TZ), to the second, with its offset; the zero
// time prints as "-".
func Format(t time.Time) string { return FormatIn(t, time.Local) }

// FormatIn prints t in loc, to the second, with its offset ("-" for the zero time).
func FormatIn(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(loc).Format(Layout)
}

// Hint is the accepted forms, for messages.
const Hint = "'YYYY-MM-DD HH:MM[:SS]' followed by an offset or a zone name (2026-11-25 09:59:00 +01:00, " +
	"2026-11-25 09:59:00 Europe/Berlin, 2026-11-25 09:59:00 UTC), RFC 3339 (2026-11-25T08:59:00Z), " +
	"or without a zone for the host's zone"

var (
	offsetRe = regexp.MustCompile(`^[+-]\d\d(:?\d\d)?$`)
	// attached finds an offset or Z written right after the clock: 09:59:00+01:00.
	attached = regexp.MustCompile(`^(\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)(Z|z|[+-]\d\d(?::?\d\d)?)$`)
)

// Parse reads a time as Format, RFC 3339 and Go's time.String print it, or a date and
// clock followed by an offset (+01:00, +0100, +01, Z) or a zone name (UTC,
// Europe/Berlin); without either, the clock is read in local. A clock that a
// daylight-saving change skips or repeats in its zone is refused: an offset says which.
func Parse(s string, local *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("no time given: use " + Hint)
	}
	if len(s) > maxInput {
		return time.Time{}, fmt.Errorf("%d characters is too long for a time: use %s", len(s), Hint)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	f := strings.Fields(s)
	clock, zone := "", f[1:]
	if d, c, ok := strings.Cut(f[0], "T"); ok {
		f[0], clock = d, c
	} else if len(f) > 1 {
		clock, zone = f[1], f[2:]
	}
	if m := attached.FindStringSubmatch(clock); m != nil {
		clock, zone = m[1], append([]string{m[2]}, zone...)
	}
	wall, err := parseWall(f[0] + " " + clock)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a time: use %s", s, Hint)
	}
	return resolve(s, wall, zone, local)
}

// parseWall reads a date and clock, as a wall time in UTC.
func parseWall(s string) (time.Time, error) {
	var err error
	for _, layout := range []string{time.DateTime, "2006-01-02 15:04"} {
		var t time.Time
		if t, err = time.Parse(layout, strings.Replace(s, ",", ".", 1)); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

// resolve places wall clock w in the zone the words after it name: an offset, a
// zone name, an offset and an abbreviation (as time.String prints), or none (local).
func resolve(s string, w time.Time, zone []string, local *time.Location) (time.Time, error) {
	switch {
	case len(zone) == 0:
		return inZone(s, w, local, "the host's zone ("+local.String()+")")
	case len(zone) > 2:
		return time.Time{}, fmt.Errorf("%q: too many words after the clock: use %s", s, Hint)
	}
	z := zone[0]
	switch up := strings.ToUpper(z); {
	case up == "Z" || up == "UTC" || up == "GMT":
		if len(zone) == 2 {
			return time.Time{}, fmt.Errorf("%q: too many words after the clock: use %s", s, Hint)
		}
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC), nil
	case offsetRe.MatchString(z):
		// What follows an offset is a zone abbreviation (time.String's "+0100 CET"):
		// the offset alone says which instant.
		return time.Parse("2006-01-02 15:04:05.999999999 -07:00", w.Format("2006-01-02 15:04:05.999999999 ")+normOffset(z))
	case len(zone) == 2:
		return time.Time{}, fmt.Errorf("%q: too many words after the clock: use %s", s, Hint)
	}
	loc, err := time.LoadLocation(z)
	if err != nil || z == "Local" {
		return time.Time{}, fmt.Errorf("%q: %q is not a zone name (such as Europe/Berlin or UTC) nor an offset (+01:00): use %s", s, z, Hint)
	}
	return inZone(s, w, loc, loc.String())
}

// normOffset writes +01, +0100 and +01:00 as +01:00.
func normOffset(z string) string {
	z = strings.ReplaceAll(z, ":", "")
	if len(z) == 3 {
		z += "00"
	}
	return z[:3] + ":" + z[3:]
}

// inZone is the one instant at which the clocks of loc show wall clock w; a wall
// clock they skip or show twice (a daylight-saving change) is refused.
func inZone(s string, w time.Time, loc *time.Location, name string) (time.Time, error) {
	guess := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	var found []time.Time
	for _, probe := range []time.Time{guess.Add(-24 * time.Hour), guess, guess.Add(24 * time.Hour)} {
		_, off := probe.Zone()
		t := w.Add(-time.Duration(off) * time.Second).In(loc)
		if _, o := t.Zone(); o == off && !containsInstant(found, t) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return time.Time{}, fmt.Errorf("%q does not exist in %s: the clocks skip it (daylight saving time); give an offset", s, name)
	case 1:
		return found[0], nil
	}
	return time.Time{}, fmt.Errorf("%q happens twice in %s (daylight saving time ends): give the offset, %s or %s", s, name,
		found[0].Format("-07:00"), found[1].Format("-07:00"))
}

func containsInstant(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.Equal(t) {
			return true
		}
	}
	return false
}
