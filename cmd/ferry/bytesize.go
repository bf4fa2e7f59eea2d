package main

import (
	"fmt"
	"strconv"
	"strings"
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
	mult := int64(1)
	s = strings.TrimSpace(s)
	if s != "" {
		switch strings.ToUpper(s[len(s)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a size like 100M, got %q", s)
	}
	*b.v = n * mult
	return nil
}

func (byteSize) Type() string { return "size" }
