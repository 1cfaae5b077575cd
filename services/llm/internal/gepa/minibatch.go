package gepa

import "math/rand/v2"

// minibatches deals training indices in epochs: every example once per
// epoch, in a fresh random order, without a repeat inside a minibatch.
type minibatches struct {
	n, size int
	rng     *rand.Rand
	queue   []int
}

func newMinibatches(n, size int, rng *rand.Rand) *minibatches {
	return &minibatches{n: n, size: size, rng: rng}
}

func (m *minibatches) next() []int {
	if len(m.queue) < m.size {
		in := make([]bool, m.n)
		for _, i := range m.queue {
			in[i] = true
		}
		var rest []int
		for i := 0; i < m.n; i++ {
			if !in[i] {
				rest = append(rest, i)
			}
		}
		m.rng.Shuffle(len(rest), func(a, b int) { rest[a], rest[b] = rest[b], rest[a] })
		m.queue = append(m.queue, rest...)
	}
	b := append([]int(nil), m.queue[:m.size]...)
	m.queue = m.queue[m.size:]
	return b
}
