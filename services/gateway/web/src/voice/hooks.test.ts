import '../testing/browser'
import { describe, expect, it } from 'vitest'
import { backendsDue } from './hooks'

describe('speech backends while a session runs', () => {
  it('are read again while one does not answer or the read failed, and no more once both answer', () => {
    const up = { reachable: true }
    const down = { reachable: false }
    expect(backendsDue(undefined, false)).toBe(true)
    expect(backendsDue({ asr: down, tts: up }, false)).toBe(true)
    expect(backendsDue({ asr: up, tts: down }, false)).toBe(true)
    expect(backendsDue({ asr: up, tts: up }, true)).toBe(true)
    expect(backendsDue({ asr: up, tts: up }, false)).toBe(false)
  })
})
