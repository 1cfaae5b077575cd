package gepa

import (
	"math/rand/v2"
	"sort"
)

// FrontEntry is a candidate on the Pareto front and the number of
// validation examples on which it has the best score (after dominated
// candidates were dropped).
type FrontEntry struct {
	Index int
	Wins  int
}

// ParetoFront returns the Pareto front over per-example scores, as in the
// paper's Algorithm 2: for each example the candidates with the best score
// on it; a candidate whose set of such examples is contained in another
// candidate's set is dominated and dropped (equal sets keep the one with the
// higher mean, then the older one). scores[k][i] is candidate k's score on
// example i; every row must have the same length. Entries are ordered by
// Index.
func ParetoFront(scores [][]float64) []FrontEntry {
	if len(scores) == 0 {
		return nil
	}
	n := len(scores[0])
	means := make([]float64, len(scores))
	for k, row := range scores {
		means[k] = mean(row)
	}
	// best[k] = examples on which k has the top score.
	best := make([][]bool, len(scores))
	for k := range scores {
		best[k] = make([]bool, n)
	}
	for i := 0; i < n; i++ {
		top := scores[0][i]
		for k := range scores {
			if scores[k][i] > top {
				top = scores[k][i]
			}
		}
		for k := range scores {
			if scores[k][i] == top {
				best[k][i] = true
			}
		}
	}
	wins := make([]int, len(scores))
	for k := range scores {
		for _, b := range best[k] {
			if b {
				wins[k]++
			}
		}
	}
	var front []FrontEntry
	for x := range scores {
		if wins[x] == 0 || dominated(x, best, wins, means) {
			continue
		}
		front = append(front, FrontEntry{Index: x})
	}
	// Count wins among the survivors only: every example keeps at least one
	// survivor, since domination is a strict order whose maximal elements
	// survive and cover what they dominate.
	for j := range front {
		for i := 0; i < n; i++ {
			if best[front[j].Index][i] {
				front[j].Wins++
			}
		}
	}
	return front
}

// dominated reports whether another candidate is best on every example x
// is best on (and on more, or as many with a higher mean, or as many with
// an equal mean and an older index).
func dominated(x int, best [][]bool, wins []int, means []float64) bool {
	for y := range best {
		if y == x || wins[y] < wins[x] {
			continue
		}
		covers := true
		for i, b := range best[x] {
			if b && !best[y][i] {
				covers = false
				break
			}
		}
		if !covers {
			continue
		}
		switch {
		case wins[y] > wins[x]:
			return true
		case means[y] > means[x]:
			return true
		case means[y] == means[x] && y < x:
			return true
		}
	}
	return false
}

// SampleFront picks a candidate from the front with probability
// proportional to its Wins.
func SampleFront(front []FrontEntry, rng *rand.Rand) int {
	total := 0
	for _, e := range front {
		total += e.Wins
	}
	if total == 0 {
		return front[0].Index
	}
	r := rng.IntN(total)
	for _, e := range front {
		if r < e.Wins {
			return e.Index
		}
		r -= e.Wins
	}
	return front[len(front)-1].Index
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
