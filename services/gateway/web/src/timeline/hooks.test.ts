import { describe, expect, it } from 'vitest'
import type { Step } from '../chat/timeline'
import { appendLive } from './hooks'

const step = (seq: number) => ({ seq, type: 'UserMessage', offsetMs: 0, gapMs: 0, origin: 'client', summary: '' }) as unknown as Step

describe('timeline', () => {
  it('a live step is added once: one the page has (an overlap after a resume) is not repeated', () => {
    const steps = [step(1), step(2)]
    expect(appendLive(steps, step(3)).map((s) => s.seq)).toEqual([1, 2, 3])
    expect(appendLive(steps, step(2))).toBe(steps)
    expect(appendLive([], step(7)).map((s) => s.seq)).toEqual([7])
  })
})
