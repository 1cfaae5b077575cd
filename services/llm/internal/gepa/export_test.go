package gepa

import "context"

// MergeOnce scores cands (parents[k] are pool indices of cands[k]'s
// parents) into a pool and attempts one merge, as the loop does after a
// mutation was accepted.
func MergeOnce[E any](ctx context.Context, cfg Config[E], cands []Candidate, parents [][]int) (Progress, bool, Result, error) {
	r := newRun(cfg)
	for k, c := range cands {
		var changed []string
		origin := "seed"
		if len(parents[k]) == 1 {
			origin = "mutation"
			for _, comp := range sortedKeys(c) {
				if c[comp] != cands[parents[k][0]][comp] {
					changed = append(changed, comp)
				}
			}
		}
		if _, err := r.add(ctx, c, parents[k], origin, changed, nil); err != nil {
			return Progress{}, false, r.result(), err
		}
	}
	r.mergesDue, r.lastNew = 1, true
	p, attempted, err := r.merge(ctx)
	return p, attempted, r.result(), err
}
