package timefmt

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestParse: offsets, zone names, UTC and no zone (the given local zone) all name the
// instant they should.
func TestParse(t *testing.T) {
	loc := berlin(t)
	winter := time.Date(2026, 11, 25, 8, 59, 0, 0, time.UTC) // 09:59 in Berlin (+01:00)
	summer := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)   // 12:00 in Berlin (+02:00)
	for in, want := range map[string]time.Time{
		"2026-11-25 09:59:00 +01:00":              winter,
		"2026-11-25 09:59:00 +0100":               winter,
		"2026-11-25 09:59:00 +01":                 winter,
		"2026-11-25 09:59:00+01:00":               winter,
		"2026-11-25T09:59:00+01:00":               winter,
		"2026-11-25T08:59:00Z":                    winter,
		"2026-11-25 08:59:00Z":                    winter,
		"2026-11-25 08:59:00 Z":                   winter,
		"2026-11-25 08:59:00 UTC":                 winter,
		"2026-11-25 08:59:00 utc":                 winter,
		"2026-11-25 03:59:00 -05:00":              winter,
		"2026-11-25 09:59:00 Europe/Berlin":       winter,
		"2026-11-25T09:59:00 Europe/Berlin":       winter,
		"2026-11-25 17:59:00 Asia/Tokyo":          winter,
		"2026-11-25 09:59:00":                     winter, // local: Berlin
		"2026-11-25 09:59":                        winter,
		"  2026-11-25 09:59:00  ":                 winter,
		"2026-11-25 09:59:00 +0100 CET":           winter, // time.String
		"2026-11-25 08:59:00 +0000 UTC":           winter,
		"2026-07-01 12:00:00":                     summer,
		"2026-07-01 12:00:00 Europe/Berlin":       summer,
		"2026-07-01 12:00:00 +02:00":              summer,
		"2026-07-01T10:00:00.000Z":                summer,
		"2026-11-25 09:59:00.250 +01:00":          winter.Add(250 * time.Millisecond),
		"2026-11-25T09:59:00.25+01:00":            winter.Add(250 * time.Millisecond),
		"2026-11-25 09:59:00.25 Europe/Berlin":    winter.Add(250 * time.Millisecond),
		"2026-11-25 09:59:00.25":                  winter.Add(250 * time.Millisecond),
		"2026-11-25 09:59:00.123456789 +0100 CET": winter.Add(123456789),
	} {
		got, err := Parse(in, loc)
		if err != nil || !got.Equal(want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestParseRefuses: what is not a time gets one line saying what is accepted; a
// clock a daylight-saving change skips or repeats is refused, naming the offsets.
func TestParseRefuses(t *testing.T) {
	loc := berlin(t)
	for in, want := range map[string]string{
		"":                                 "no time given",
		"yesterday":                        "is not a time",
		"2026-11-25":                       "is not a time",
		"2026-13-25 09:59:00":              "is not a time",
		"2026-11-25 09:59:00 Mars/Olympus": "is not a zone name",
		"2026-11-25 09:59:00 CET CEST":     "too many words",
		"2026-11-25 09:59:00 +01:00 CET x": "too many words",
		"2026-11-25 09:59:00 UTC +01:00":   "too many words",
		"2026-11-25 09:59:00 Local":        "is not a zone name",
		"2026-11-25 09:59:00 " + strings.Repeat("x", 100): "too long",
		"2026-03-29 02:30:00":                             "does not exist in the host's zone (Europe/Berlin): the clocks skip it",
		"2026-03-29 02:30:00 Europe/Berlin":               "does not exist in Europe/Berlin",
		"2026-10-25 02:30:00":                             "happens twice in the host's zone (Europe/Berlin) (daylight saving time ends): give the offset, +02:00 or +01:00",
		"2026-10-25 02:30:00 Europe/Berlin":               "happens twice in Europe/Berlin",
	} {
		got, err := Parse(in, loc)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", in, got, err, want)
		}
	}
	// Either side of the changes, and with the offset, the same clocks are fine.
	for in, want := range map[string]time.Time{
		"2026-03-29 01:59:59":        time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC),
		"2026-03-29 03:00:00":        time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC),
		"2026-10-25 02:30:00 +02:00": time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC),
		"2026-10-25 02:30:00 +01:00": time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC),
		"2026-10-25 03:00:00":        time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC),
		"2026-10-25 01:59:59":        time.Date(2026, 10, 24, 23, 59, 59, 0, time.UTC),
	} {
		got, err := Parse(in, loc)
		if err != nil || !got.Equal(want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestRoundTrip: every form ferry prints a time in (Format in any zone, list --json's
// RFC 3339, time.String in logs) reads back as the same instant, whatever the zone of
// the reader, across both daylight-saving changes of a year.
func TestRoundTrip(t *testing.T) {
	zones := []*time.Location{time.UTC, berlin(t)}
	for _, name := range []string{"America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, loc)
	}
	var instants []time.Time
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for at := start; at.Before(start.AddDate(1, 0, 0)); at = at.Add(5*time.Hour + 7*time.Second) {
		instants = append(instants, at)
	}
	// Berlin's (and the EU's) changes at 01:00 UTC, New York's at 07:00 and 06:00 UTC.
	for _, change := range []time.Time{time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)} {
		for d := -90 * time.Minute; d <= 90*time.Minute; d += 15 * time.Minute {
			instants = append(instants, change.Add(d), change.Add(d-time.Second))
		}
	}
	for _, at := range instants {
		for _, shown := range zones {
			b, _ := json.Marshal(at.In(shown))
			printed := []string{FormatIn(at, shown), strings.Trim(string(b), `"`), at.In(shown).String(), at.In(shown).Format(time.RFC3339)}
			for _, p := range printed {
				for _, reader := range zones {
					got, err := Parse(p, reader)
					if err != nil || !got.Equal(at) {
						t.Fatalf("%q (printed in %s, read in %s) = %v, %v; want %v", p, shown, reader, got, err, at)
					}
				}
			}
		}
	}
	// Format carries the offset and truncates to the second.
	at := time.Date(2026, 11, 25, 8, 59, 0, 700_000_000, time.UTC)
	if got := FormatIn(at, berlin(t)); got != "2026-11-25 09:59:00 +01:00" {
		t.Errorf("FormatIn = %q", got)
	}
	if got := FormatIn(time.Time{}, time.UTC); got != "-" {
		t.Errorf("zero time = %q", got)
	}
}
