package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ferry-backup/ferry/internal/optfile"
)

// byteSize is a flag value like 512K, 100M or 2G (powers of 1024).
type byteSize struct{ v *int64 }

func (b byteSize) String() string {
	if b.v == nil || *b.v == 0 {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if *b.v%u.size == 0 {
			return strconv.FormatInt(*b.v/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b byteSize) Set(s string) error {
	n, err := optfile.ParseSize(s)
	if err != nil {
		return fmt.Errorf("want a size like 100M: %w", err)
	}
	*b.v = n
	return nil
}

func (byteSize) Type() string { return "size" }

// intSize is byteSize for a setting held in an int (at most 1 GiB here).
type intSize struct{ v *int }

func (b intSize) String() string {
	n := int64(*b.v)
	return byteSize{&n}.String()
}

func (b intSize) Set(s string) error {
	var n int64
	if err := (byteSize{&n}).Set(s); err != nil {
		return err
	}
	if n < 0 || n > 1<<30 {
		return fmt.Errorf("%s is out of range: give at most 1G", s)
	}
	*b.v = int(n)
	return nil
}

func (intSize) Type() string { return "size" }

// sizeText prints n as a flag takes it (256K, 1M), for help text generated from
// internal/defaults.
func sizeText(n int64) string { return byteSize{&n}.String() }

// streamFlag is --stream: a switch that also takes mariabackup's --stream=xbstream
// (and mbstream, its other name), the one format ferry streams.
type streamFlag struct{ v *bool }

func (s streamFlag) String() string { return strconv.FormatBool(s.v != nil && *s.v) }

func (s streamFlag) Set(v string) error {
	switch strings.ToLower(v) {
	case "xbstream", "mbstream":
		*s.v = true
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want xbstream (or mbstream), true or false, not %q", v)
	}
	*s.v = b
	return nil
}

func (streamFlag) Type() string { return "bool" }
