import { FakeServer } from '../testing/browser'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { api } from '../api'
import type { OptimizationRun } from '../types'
import { watchRun } from './hooks'

const run = (o: Partial<OptimizationRun>): OptimizationRun => ({
  id: 'or_1', scope: 'user', components: ['system'], budget: 10, weights: {}, status: 'queued', iteration: 0, metricCalls: 0,
  frontSize: 0, bestScores: {}, createdAt: 0, elites: [], ...o,
})

describe('watching a run', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('reads it every second while it is queued or running, and stops once it ended', async () => {
    const states = [run({}), run({ status: 'running', metricCalls: 4 }), run({ status: 'done', metricCalls: 10 })]
    const srv = new FakeServer()
    let n = 0
    srv.on('GET /v1/optimize/runs/or_1', () => ({ status: 200, body: states[Math.min(n++, states.length - 1)] }))
    const seen: string[] = []
    watchRun('or_1', (id, signal) => api.optimizationRun(id, signal), (r) => seen.push(`${r.status}:${r.metricCalls}`), () => {})
    await vi.advanceTimersByTimeAsync(0)
    expect(seen).toEqual(['queued:0'])
    await vi.advanceTimersByTimeAsync(999)
    expect(seen).toHaveLength(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(seen).toEqual(['queued:0', 'running:4'])
    await vi.advanceTimersByTimeAsync(5000)
    expect(seen).toEqual(['queued:0', 'running:4', 'done:10'])
    expect(srv.requests.filter((r) => r.path === '/v1/optimize/runs/or_1')).toHaveLength(3)
  })

  it('says a failed read and tries again', async () => {
    const srv = new FakeServer()
    let n = 0
    srv.on('GET /v1/optimize/runs/or_1', () => (n++ === 0 ? { status: 503, body: { error: { message: 'the bus is down' } } } : { status: 200, body: run({ status: 'failed', error: '3 stored answers to learn from, 4 needed' }) }))
    const errors: string[] = []
    const seen: OptimizationRun[] = []
    watchRun('or_1', (id, signal) => api.optimizationRun(id, signal), (r) => seen.push(r), (e) => errors.push((e as Error).message))
    await vi.advanceTimersByTimeAsync(0)
    expect(errors).toEqual(['the bus is down'])
    await vi.advanceTimersByTimeAsync(1000)
    expect(seen.map((r) => r.error)).toEqual(['3 stored answers to learn from, 4 needed'])
    await vi.advanceTimersByTimeAsync(5000)
    expect(n).toBe(2)
  })

  it('reads nothing more once stopped', async () => {
    const srv = new FakeServer()
    srv.on('GET /v1/optimize/runs/or_1', { status: 200, body: run({ status: 'running' }) })
    const stop = watchRun('or_1', (id, signal) => api.optimizationRun(id, signal), () => {}, () => {})
    await vi.advanceTimersByTimeAsync(2000)
    const asked = srv.requests.length
    expect(asked).toBe(3)
    stop()
    await vi.advanceTimersByTimeAsync(5000)
    expect(srv.requests.length).toBe(asked)
  })

  it('asks the server for what the page changes, in the contract’s shapes', async () => {
    const srv = new FakeServer()
    srv.on('PUT /v1/optimize/preferences', ({ body }) => ({ status: 200, body: { ...(body as object), updatedAt: 1 } }))
    srv.on('POST /v1/optimize/runs', { status: 202, body: run({}) })
    srv.on('POST /v1/optimize/runs/or_1/select', { status: 200, body: { versions: [] } })
    srv.on('POST /v1/prompt-versions/rollback', { status: 200, body: { serving: 'pv_1' } })
    srv.on('GET /v1/prompt-versions', { status: 200, body: { versions: [] } })
    await api.putOptimizePreferences('mine', { correctness: 1, brevity: 0.5 })
    await api.startOptimizationRun('installation', 200, ['system'])
    await api.selectElite('or_1', 'pc_1')
    await api.selectElite('or_1', 'pc_1', 0.2)
    await api.rollbackPrompt('voice_style', 'mine')
    await api.promptVersions('voice_style', 'installation')
    const r = srv.requests
    expect(r.map((x) => x.body)).toEqual([
      { scope: 'mine', weights: { correctness: 1, brevity: 0.5 } },
      { scope: 'installation', budget: 200, components: ['system'] },
      { candidateId: 'pc_1' },
      { candidateId: 'pc_1', rolloutShare: 0.2 },
      { component: 'voice_style', scope: 'mine' },
      undefined,
    ])
    expect(Object.fromEntries(r[5]!.query)).toEqual({ component: 'voice_style', scope: 'installation' })
  })
})
