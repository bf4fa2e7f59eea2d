package workers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBySizeRunsEveryItemLargestFirstWithinItsClass(t *testing.T) {
	sizes := []int64{5, 3 << 20, 7, 1 << 30, 2 << 20, 1, 1 << 20}
	var mu sync.Mutex
	var large, small []int64
	p := Plan{Small: 1 << 20, Large: 1, SmallWorkers: 1}
	err := BySize(context.Background(), sizes, func(s int64) int64 { return s }, p, func(_ context.Context, s int64) error {
		mu.Lock()
		defer mu.Unlock()
		if s > p.Small {
			large = append(large, s)
		} else {
			small = append(small, s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1 << 30, 3 << 20, 2 << 20}; !slices.Equal(large, want) {
		t.Errorf("large items ran as %v, want %v", large, want)
	}
	if want := []int64{1 << 20, 7, 5, 1}; !slices.Equal(small, want) {
		t.Errorf("small items ran as %v, want %v", small, want)
	}
}

func TestBySizeKeepsEachClassWithinItsWorkers(t *testing.T) {
	items := make([]int64, 200)
	for i := range items {
		items[i] = int64(i%2) * (2 << 20) // half large, half small
	}
	var inLarge, inSmall, peakLarge, peakSmall atomic.Int32
	peak := func(cur, p *atomic.Int32) {
		n := cur.Add(1)
		for {
			old := p.Load()
			if n <= old || p.CompareAndSwap(old, n) {
				return
			}
		}
	}
	gate := make(chan struct{})
	go func() {
		for range 200 {
			gate <- struct{}{}
		}
	}()
	err := BySize(context.Background(), items, func(s int64) int64 { return s }, Plan{Small: 1 << 20, Large: 2, SmallWorkers: 5},
		func(_ context.Context, s int64) error {
			cur, p := &inSmall, &peakSmall
			if s > 0 {
				cur, p = &inLarge, &peakLarge
			}
			peak(cur, p)
			<-gate
			cur.Add(-1)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if peakLarge.Load() > 2 || peakSmall.Load() > 5 {
		t.Fatalf("peaks %d large, %d small workers, want at most 2 and 5", peakLarge.Load(), peakSmall.Load())
	}
}

func TestBySizeStopsAtTheFirstError(t *testing.T) {
	items := make([]int64, 1000)
	boom := errors.New("boom")
	var ran atomic.Int32
	err := BySize(context.Background(), items, func(s int64) int64 { return s }, Plan{Small: 1, Large: 1, SmallWorkers: 2},
		func(ctx context.Context, _ int64) error {
			if ran.Add(1) == 3 {
				return boom
			}
			return ctx.Err()
		})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if n := ran.Load(); n > 10 {
		t.Fatalf("%d items ran after the error", n)
	}
}
