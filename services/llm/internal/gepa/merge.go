package gepa

import (
	"context"
	"sort"
)

// merge tries the paper's system-aware merge: two candidates of the front
// that descend from a common ancestor and each changed components the
// other did not. attempted is false when no such pair gave a new
// candidate; then nothing was spent.
func (r *run[E]) merge(ctx context.Context) (p Progress, attempted bool, err error) {
	if r.remaining() < len(r.cfg.Val) {
		return Progress{}, false, nil
	}
	front := r.front()
	if len(front) < 2 {
		return Progress{}, false, nil
	}
	var pairs [][2]int
	for a := 0; a < len(front); a++ {
		for b := a + 1; b < len(front); b++ {
			pairs = append(pairs, [2]int{front[a].Index, front[b].Index})
		}
	}
	r.rng.Shuffle(len(pairs), func(a, b int) { pairs[a], pairs[b] = pairs[b], pairs[a] })
	for _, pr := range pairs {
		i, j := pr[0], pr[1]
		anc, child, changed, ok := r.mergeCandidate(i, j)
		if !ok {
			continue
		}
		r.tried[[3]int{i, j, anc}] = true
		r.merges++
		r.mergesDue--
		p, err := r.judgeMerge(ctx, i, j, child, changed)
		return p, true, err
	}
	return Progress{}, false, nil
}

// mergeCandidate finds the best common ancestor of i and j for which the
// merge is new and combines the two: per component, the version that
// changed from the ancestor; when both changed it, the version of the
// candidate with the higher validation mean (i on a tie).
func (r *run[E]) mergeCandidate(i, j int) (anc int, child Candidate, changed []string, ok bool) {
	ai, aj := r.ancestors(i), r.ancestors(j)
	if ai[j] || aj[i] {
		return 0, nil, nil, false // one descends from the other: nothing to combine
	}
	var common []int
	for a := range ai {
		if aj[a] {
			common = append(common, a)
		}
	}
	// Best ancestor first: the highest mean, then the most recent.
	sort.Slice(common, func(x, y int) bool {
		mx, my := r.pool[common[x]].Mean, r.pool[common[y]].Mean
		if mx != my {
			return mx > my
		}
		return common[x] > common[y]
	})
	ci, cj := r.pool[i].Candidate, r.pool[j].Candidate
	for _, a := range common {
		if r.tried[[3]int{i, j, a}] {
			continue
		}
		// An ancestor better than a descendant means that line lost ground
		// since; its changes are not the ones to keep.
		if r.pool[a].Mean > r.pool[i].Mean || r.pool[a].Mean > r.pool[j].Mean {
			continue
		}
		ca := r.pool[a].Candidate
		c := ca.Clone()
		var ch []string
		complementary := false
		for _, comp := range sortedKeys(ca) {
			vi, vj, va := ci[comp], cj[comp], ca[comp]
			switch {
			case vi == va && vj == va:
				continue
			case vi == va:
				c[comp] = vj
				complementary = true
			case vj == va:
				c[comp] = vi
				complementary = true
			case r.pool[j].Mean > r.pool[i].Mean:
				c[comp] = vj
			default:
				c[comp] = vi
			}
			ch = append(ch, comp)
		}
		if !complementary || r.keys[c.key()] {
			r.tried[[3]int{i, j, a}] = true
			continue
		}
		return a, c, ch, true
	}
	return 0, nil, nil, false
}

func (r *run[E]) ancestors(k int) map[int]bool {
	seen := map[int]bool{}
	stack := append([]int(nil), r.pool[k].Parents...)
	for len(stack) > 0 {
		a := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[a] {
			continue
		}
		seen[a] = true
		stack = append(stack, r.pool[a].Parents...)
	}
	return seen
}

// judgeMerge scores the merged child on a validation subsample chosen where
// the parents differ (their scores there are known, so only the child is
// paid for) and keeps it if it does at least as well as the better parent
// there; the rest of the validation set is then evaluated.
func (r *run[E]) judgeMerge(ctx context.Context, i, j int, child Candidate, changed []string) (Progress, error) {
	p := Progress{Kind: KindMerge, Parents: []int{i, j}, Components: changed, Child: -1}
	sub := r.mergeSubsample(i, j)
	batch := make([]E, len(sub))
	for k, v := range sub {
		batch[k] = r.cfg.Val[v]
	}
	eb, cs, err := r.evaluate(ctx, batch, child, false)
	if err != nil {
		return p, err
	}
	var si, sj float64
	for _, v := range sub {
		si += r.pool[i].ValScores[v]
		sj += r.pool[j].ValScores[v]
	}
	p.ParentSum, p.ChildSum = max(si, sj), sum(cs)
	if p.ChildSum < p.ParentSum {
		p.Reason = "worse than a parent on the merge subsample"
		return p, nil
	}
	known := make(map[int]Outcome, len(sub))
	for k, v := range sub {
		known[v] = eb.Outcomes[k]
	}
	idx, err := r.add(ctx, child, []int{i, j}, "merge", changed, known)
	if err != nil {
		return p, err
	}
	p.Accepted, p.Child = true, idx
	return p, nil
}

// mergeSubsample takes validation examples where i beats j and where j
// beats i in turn, then fills up with the others, all in random order.
func (r *run[E]) mergeSubsample(i, j int) []int {
	var iWins, jWins, rest []int
	for v := range r.cfg.Val {
		a, b := r.pool[i].ValScores[v], r.pool[j].ValScores[v]
		switch {
		case a > b:
			iWins = append(iWins, v)
		case b > a:
			jWins = append(jWins, v)
		default:
			rest = append(rest, v)
		}
	}
	for _, s := range [][]int{iWins, jWins, rest} {
		r.rng.Shuffle(len(s), func(a, b int) { s[a], s[b] = s[b], s[a] })
	}
	n := r.cfg.MergeSubsample
	var out []int
	for len(out) < n && (len(iWins) > 0 || len(jWins) > 0) {
		if len(iWins) > 0 {
			out, iWins = append(out, iWins[0]), iWins[1:]
		}
		if len(out) < n && len(jWins) > 0 {
			out, jWins = append(out, jWins[0]), jWins[1:]
		}
	}
	for len(out) < n && len(rest) > 0 {
		out, rest = append(out, rest[0]), rest[1:]
	}
	sort.Ints(out)
	return out
}
