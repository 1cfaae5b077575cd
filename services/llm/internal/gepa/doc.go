// Package gepa optimises named texts (prompts, style instructions, tool
// descriptions) with GEPA, reflective prompt evolution (Agrawal et al.
// 2025, arXiv 2507.19457), following the reference implementation's API:
// Optimize(seed, train, val, adapter, reflector, budget). It does no I/O:
// the Adapter runs the system and the Reflector is the reflection model.
//
// The run, as implemented:
//
//   - The pool starts with the seed, scored on every validation example.
//     The budget counts metric calls, one per example evaluated; an
//     evaluation that would exceed it is never started.
//   - Each iteration picks a parent from the Pareto front over
//     per-validation-example scores (Algorithm 2 of the paper): for each
//     example the candidates with its best score; a candidate whose such
//     examples are all covered by another one's is dominated and dropped;
//     the parent is drawn with probability proportional to how many
//     examples it is best on. "current_best" (highest mean) is available as
//     a baseline.
//   - A component is chosen round robin per candidate (a child continues
//     after the component that made it) or all at once; the parent runs on
//     a training minibatch with traces (epoch-shuffled, 3 by default); the
//     adapter turns the traces into reflective records; the Reflector
//     proposes the component's new text; the child runs on the same
//     minibatch and is kept only if its score sum is strictly higher, then
//     scored on the whole validation set and added with its parent.
//   - Merge (optional, MaxMerges): after an accepted mutation, two front
//     candidates that share an ancestor, neither descending from the other,
//     are combined per component: the version that changed from the
//     ancestor, and when both changed it, the one of the candidate with the
//     higher validation mean. The child is judged on validation examples
//     where its parents differ, balanced between the two, and kept if it
//     does at least as well as the better parent there.
//
// Where the paper leaves room, this package chooses:
//
//   - A mutation is started only if the budget can still pay for the
//     parent's and child's minibatches and the child's validation (2b+|val|),
//     so an accepted child is never lost for want of budget; a run can end
//     with fewer calls left than that.
//   - A parent already perfect on its minibatch is not reflected on (the
//     reference's skip_perfect_score); a proposal identical to its parent or
//     to a pool member is rejected without being evaluated.
//   - Merge subsample scores are reused: only the child is evaluated on
//     them (its parents' validation scores are known), and the rest of the
//     validation set completes its scores when it is kept.
//   - Per-dimension scores (correctness, faithfulness, …) become the
//     objective as the weighted mean, under Config.Weights, of the weighted
//     dimensions an outcome has; Member and Progress report each
//     dimension's mean.
//   - The run stops early when a candidate solves every validation example.
//
// Everything random comes from Config.Rand, so a run is reproducible given
// a deterministic adapter and reflector. Optimize runs on the calling
// goroutine and calls OnIteration synchronously.
package gepa
