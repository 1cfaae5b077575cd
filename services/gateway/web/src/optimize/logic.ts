// What the "Improve Alicia" page works out without a server: the
// dimensions and their labels, a run's progress, whether to keep polling
// it, the rollout share asked for, what an elite changes (a word diff) and
// how a version's votes read. Tested in logic.test.ts.
import type { Elite, OptimizationRun, PromptVersion, RunStatus } from '../types'

// The dimensions a run weighs (API.md "Prompt optimisation"), in the
// order the page shows them.
export const DIMENSIONS = [
  { key: 'correctness', label: 'Correctness', hint: 'what it says is right' },
  { key: 'faithfulness', label: 'Faithfulness', hint: 'sticks to the tool results and memories it used' },
  { key: 'relevancy', label: 'Relevancy', hint: 'answers what was asked' },
  { key: 'userFeedback', label: 'My votes', hint: 'what you voted on its answers' },
  { key: 'brevity', label: 'Brevity', hint: 'short when spoken' },
  { key: 'latency', label: 'Speed', hint: 'answers quickly' },
] as const

export type Dimension = (typeof DIMENSIONS)[number]['key']

// The components a person may ask a run to rewrite from this page.
export const COMPONENTS = [
  { key: 'system', label: 'System prompt' },
  { key: 'voice_style', label: 'Voice style' },
] as const

export const DEFAULT_BUDGET = 200
export const MAX_BUDGET = 100000

// POLL_MS: a queued or running run is read again this often.
export const POLL_MS = 1000

// componentLabel names a component for people.
export function componentLabel(c: string): string {
  const known = COMPONENTS.find((x) => x.key === c)
  if (known) return known.label
  if (c === 'memory_extraction') return 'Memory extraction'
  if (c === 'demonstrations') return 'Demonstrations'
  if (c.startsWith('tool:')) return `Tool ${c.slice(5)}`
  return c
}

// weightsOf gives every dimension a weight in 0..1 (missing: 1, so an
// unset dimension counts fully, as the server's defaults do).
export function weightsOf(w: Record<string, number> | undefined): Record<Dimension, number> {
  const out = {} as Record<Dimension, number>
  for (const d of DIMENSIONS) {
    const v = w?.[d.key]
    out[d.key] = typeof v === 'number' && Number.isFinite(v) ? Math.min(1, Math.max(0, v)) : 1
  }
  return out
}

// live: the run may still move (the page polls it).
export function live(status: RunStatus): boolean {
  return status === 'queued' || status === 'running'
}

// progress is a run's share of its budget spent, 0..1.
export function progress(r: Pick<OptimizationRun, 'metricCalls' | 'budget' | 'status'>): number {
  if (r.status === 'done') return 1
  if (r.budget <= 0) return 0
  return Math.min(1, Math.max(0, r.metricCalls / r.budget))
}

// budgetProblem says what is wrong with the budget typed, or nothing.
export function budgetProblem(text: string): string | undefined {
  const n = Number(text)
  if (text.trim() === '' || !Number.isInteger(n)) return 'The budget is a whole number of metric calls.'
  if (n < 1 || n > MAX_BUDGET) return `The budget is between 1 and ${MAX_BUDGET} metric calls.`
  return undefined
}

// shareOf reads the rollout asked for: all new conversations (undefined)
// or a percentage of them as a share in (0, 1).
export function shareOf(mode: 'all' | 'share', percent: string): { share?: number; problem?: string } {
  if (mode === 'all') return {}
  const p = Number(percent)
  if (percent.trim() === '' || !Number.isFinite(p) || p <= 0 || p >= 100)
    return { problem: 'A share is a percentage above 0 and below 100 (or choose all new conversations).' }
  return { share: p / 100 }
}

// pct writes a 0..1 score as a whole percentage.
export function pct(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '–' : `${Math.round(v * 100)} %`
}

// voteRate says how a version's answers were voted.
export function voteRate(v: Pick<PromptVersion, 'answers' | 'upVotes' | 'downVotes' | 'upVoteRate'>): string {
  const votes = v.upVotes + v.downVotes
  const answers = `${v.answers} ${v.answers === 1 ? 'answer' : 'answers'}`
  if (votes === 0) return `${answers}, no votes yet`
  const rate = v.upVoteRate
    ? `${pct(v.upVoteRate.estimate)} up (95 % interval ${pct(v.upVoteRate.low)}–${pct(v.upVoteRate.high)})`
    : `${pct(v.upVotes / votes)} up`
  return `${answers}, ${rate} of ${votes} ${votes === 1 ? 'vote' : 'votes'}`
}

// serving: the versions that serve new conversations now, the one
// rolling out (with a share) after the one it rolls out beside.
export function serving(vs: PromptVersion[]): PromptVersion[] {
  return vs.filter((v) => v.status === 'active').sort((a, b) => (a.rolloutShare === undefined ? 0 : 1) - (b.rolloutShare === undefined ? 0 : 1))
}

export interface Change {
  component: string
  before?: string
  after: string
}

// changes lists what an elite changes against what serves now (before:
// the serving text, when known), in the page's component order.
export function changes(e: Elite, current: Record<string, string | undefined>): Change[] {
  const order = (c: string) => {
    const i = COMPONENTS.findIndex((x) => x.key === c)
    return i < 0 ? COMPONENTS.length : i
  }
  return Object.keys(e.components)
    .sort((a, b) => order(a) - order(b) || a.localeCompare(b))
    .map((component) => ({ component, before: current[component], after: e.components[component] ?? '' }))
}

export type DiffPart = { kind: 'same' | 'added' | 'removed'; text: string }

// wordDiff compares two texts word by word (a longest common subsequence
// of whitespace-separated words), joining runs of the same kind. Texts
// beyond 2,000 words each are shown as removed and added whole.
export function wordDiff(before: string, after: string): DiffPart[] {
  const a = before.split(/\s+/).filter(Boolean)
  const b = after.split(/\s+/).filter(Boolean)
  const out: DiffPart[] = []
  const push = (kind: DiffPart['kind'], w: string) => {
    const last = out[out.length - 1]
    if (last && last.kind === kind) last.text += ' ' + w
    else out.push({ kind, text: w })
  }
  if (a.length > 2000 || b.length > 2000) {
    if (a.length) out.push({ kind: 'removed', text: a.join(' ') })
    if (b.length) out.push({ kind: 'added', text: b.join(' ') })
    return out
  }
  // lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0))
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!)
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      push('same', a[i]!)
      i++
      j++
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) push('removed', a[i++]!)
    else push('added', b[j++]!)
  }
  while (i < a.length) push('removed', a[i++]!)
  while (j < b.length) push('added', b[j++]!)
  return out
}

// statusLabel says a run's status in words.
export function statusLabel(r: Pick<OptimizationRun, 'status'>): string {
  switch (r.status) {
    case 'queued':
      return 'Waiting to start'
    case 'running':
      return 'Running'
    case 'done':
      return 'Done'
    case 'failed':
      return 'Failed'
    case 'cancelled':
      return 'Cancelled'
  }
}

// promotable: a run whose elites may be promoted (one of them, once).
export function promotable(r: OptimizationRun): boolean {
  return (r.status === 'done' || r.status === 'cancelled') && !r.elites.some((e) => e.promotedAt !== undefined)
}
