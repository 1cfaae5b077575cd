import { describe, expect, it } from 'vitest'
import type { Elite, OptimizationRun, PromptVersion } from '../types'
import { budgetProblem, changes, componentLabel, live, progress, promotable, serving, shareOf, voteRate, weightsOf, wordDiff } from './logic'

const run = (o: Partial<OptimizationRun>): OptimizationRun => ({
  id: 'or_1', scope: 'user', components: ['system'], budget: 200, weights: {}, status: 'running', iteration: 0, metricCalls: 0,
  frontSize: 0, bestScores: {}, createdAt: 0, elites: [], ...o,
})
const elite = (o: Partial<Elite>): Elite => ({ candidateId: 'pc_1', components: {}, scores: {}, examples: [], ...o })
const version = (o: Partial<PromptVersion>): PromptVersion => ({
  id: 'pv_1', component: 'system', version: 1, text: 't', status: 'active', createdBy: 'seed', createdAt: 0, updatedAt: 0,
  answers: 0, upVotes: 0, downVotes: 0, ...o,
})

describe('improve alicia', () => {
  it('gives every dimension a weight in 0..1, an unset one counting fully', () => {
    expect(weightsOf({ correctness: 0.25, brevity: 3, latency: -1, relevancy: Number.NaN })).toEqual({
      correctness: 0.25, faithfulness: 1, relevancy: 1, userFeedback: 1, brevity: 1, latency: 0,
    })
    expect(weightsOf(undefined).userFeedback).toBe(1)
  })

  it('polls only a run that may still move', () => {
    expect(['queued', 'running'].every((s) => live(s as OptimizationRun['status']))).toBe(true)
    expect(['done', 'failed', 'cancelled'].some((s) => live(s as OptimizationRun['status']))).toBe(false)
  })

  it('shows the budget spent, full once done, never beyond it', () => {
    expect(progress(run({ metricCalls: 50 }))).toBe(0.25)
    expect(progress(run({ metricCalls: 230 }))).toBe(1)
    expect(progress(run({ metricCalls: 120, status: 'done' }))).toBe(1)
    expect(progress(run({ budget: 0 }))).toBe(0)
  })

  it('refuses a budget that is not a whole number of metric calls within bounds', () => {
    expect(budgetProblem('200')).toBeUndefined()
    expect(budgetProblem('1')).toBeUndefined()
    expect(budgetProblem('')).toMatch(/whole number/)
    expect(budgetProblem('2.5')).toMatch(/whole number/)
    expect(budgetProblem('0')).toMatch(/between 1 and 100000/)
    expect(budgetProblem('100001')).toMatch(/between 1 and 100000/)
  })

  it('reads the rollout: all new conversations, or a percentage as a share', () => {
    expect(shareOf('all', 'junk')).toEqual({})
    expect(shareOf('share', '25')).toEqual({ share: 0.25 })
    for (const bad of ['0', '100', '', 'x', '-5']) expect(shareOf('share', bad).problem, bad).toMatch(/percentage/)
  })

  it('says how a version was voted, with its interval when the server gives one', () => {
    expect(voteRate(version({ answers: 1 }))).toBe('1 answer, no votes yet')
    expect(voteRate(version({ answers: 5, upVotes: 3, downVotes: 1 }))).toBe('5 answers, 75 % up of 4 votes')
    expect(voteRate(version({ answers: 2, upVotes: 1, upVoteRate: { estimate: 1, low: 0.21, high: 1 } }))).toBe(
      '2 answers, 100 % up (95 % interval 21 %–100 %) of 1 vote',
    )
  })

  it('lists the versions serving now, the one rolling out after the one it serves beside', () => {
    const vs = [version({ id: 'new', rolloutShare: 0.2 }), version({ id: 'old' }), version({ id: 'gone', status: 'retired' })]
    expect(serving(vs).map((v) => v.id)).toEqual(['old', 'new'])
  })

  it("lists an elite's changes in the page's order, each against what serves now", () => {
    const e = elite({ components: { 'tool:calculator': 'c', voice_style: 'v2', system: 's2' } })
    expect(changes(e, { system: 's1' })).toEqual([
      { component: 'system', before: 's1', after: 's2' },
      { component: 'voice_style', before: undefined, after: 'v2' },
      { component: 'tool:calculator', before: undefined, after: 'c' },
    ])
    expect(componentLabel('voice_style')).toBe('Voice style')
    expect(componentLabel('tool:calculator')).toBe('Tool calculator')
  })

  it('diffs word by word, joining runs of the same kind', () => {
    expect(wordDiff('You are Alicia. Be helpful.', 'You are Alicia. Be helpful. Answer in one sentence.')).toEqual([
      { kind: 'same', text: 'You are Alicia. Be helpful.' },
      { kind: 'added', text: 'Answer in one sentence.' },
    ])
    expect(wordDiff('Be very kind always', 'Be kind now')).toEqual([
      { kind: 'same', text: 'Be' },
      { kind: 'removed', text: 'very' },
      { kind: 'same', text: 'kind' },
      { kind: 'removed', text: 'always' },
      { kind: 'added', text: 'now' },
    ])
    expect(wordDiff('', 'new')).toEqual([{ kind: 'added', text: 'new' }])
    const long = Array.from({ length: 2001 }, (_, i) => `w${i}`).join(' ')
    expect(wordDiff(long, 'x').map((p) => p.kind)).toEqual(['removed', 'added'])
  })

  it('offers promotion only for an ended run none of whose elites was promoted', () => {
    const e = elite({})
    expect(promotable(run({ status: 'done', elites: [e] }))).toBe(true)
    expect(promotable(run({ status: 'cancelled', elites: [e] }))).toBe(true)
    expect(promotable(run({ status: 'running', elites: [e] }))).toBe(false)
    expect(promotable(run({ status: 'done', elites: [e, elite({ promotedAt: 1 })] }))).toBe(false)
  })
})
