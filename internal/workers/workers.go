// Package workers runs copies of many files of very different sizes: largest first,
// with the small ones on workers of their own so that a few large files neither wait
// behind thousands of small ones nor leave them for the end.
package workers

import (
	"cmp"
	"context"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"
)

// Plan says how BySize shares its work.
type Plan struct {
	Small        int64 // items of at most this many bytes are small
	Large        int   // workers of the large items (at least 1)
	SmallWorkers int   // workers of the small items, at the same time (at least 1)
}

// SmallFileWorkers is the usual Plan.SmallWorkers: enough opens, creates and small
// reads in flight to hide their latency (a server of 20,000 tables has 19,000
// tablespaces of 96 KiB), few enough not to be a load of their own.
const SmallFileWorkers = 8

// SmallFile is the usual Plan.Small: a file read in one or two large reads.
const SmallFile = 1 << 20

// BySize runs fn on every item, largest first (size gives an item's bytes; equal
// sizes keep their order): the large items with p.Large workers and the small ones
// with p.SmallWorkers at the same time. It returns the first error, after which ctx
// passed to fn is cancelled and items not started are not run. items is sorted in place.
func BySize[T any](ctx context.Context, items []T, size func(T) int64, p Plan, fn func(context.Context, T) error) error {
	slices.SortStableFunc(items, func(a, b T) int { return cmp.Compare(size(b), size(a)) })
	cut := sort.Search(len(items), func(i int) bool { return size(items[i]) <= p.Small })
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return run(gctx, items[:cut], max(p.Large, 1), fn) })
	g.Go(func() error { return run(gctx, items[cut:], max(p.SmallWorkers, 1), fn) })
	return g.Wait()
}

// run runs fn on items in order, n at a time, until the first error.
func run[T any](ctx context.Context, items []T, n int, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, it := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(gctx, it)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
