import { describe, expect, it } from 'vitest'
import { marks, timing, type Step } from './timeline'

let seq = 0
function step(type: string, timeMs: number, more: Partial<Step> = {}): Step {
  seq++
  return { seq, time: '', timeMs, offsetMs: 0, gapMs: 0, origin: 'server', type, stanzaId: -seq, summary: '', ...more }
}

describe('waterfall', () => {
  it('times a voice turn from its envelopes', () => {
    const steps = [
      step('Transcription', 900, { messageId: 'am_u', final: false }),
      step('AudioChunk', 1000, { origin: 'client', messageId: 'am_u' }),
      step('Transcription', 1120, { messageId: 'am_u', final: true }),
      step('UserMessage', 1121, { origin: 'client', messageId: 'am_u' }),
      step('StartAnswer', 1130, { messageId: 'am_a', replyTo: 'am_u' }),
      step('AssistantSentence', 1170, { messageId: 'am_a', sequence: 1 }),
      step('AssistantSentence', 1175, { messageId: 'am_a', sequence: 2 }),
      step('SentenceAudio', 1250, { origin: 'agent', messageId: 'am_a', sequence: 1 }),
    ]
    const t = timing(steps, 'am_a')!
    expect(t.voice).toBe(true)
    expect(marks(t)).toEqual([
      { label: 'end of speech', at: 1000 }, { label: 'transcript', at: 1120 }, { label: 'answer started', at: 1130 },
      { label: 'first sentence', at: 1170 }, { label: 'first audio', at: 1250 },
    ])
  })

  it('times a typed turn from the message sent', () => {
    const steps = [
      step('UserMessage', 50, { origin: 'client', messageId: 'am_t' }),
      step('StartAnswer', 60, { messageId: 'am_b', replyTo: 'am_t' }),
      step('AssistantSentence', 75, { messageId: 'am_b', sequence: 1 }),
    ]
    const t = timing(steps, 'am_b')!
    expect(t.voice).toBe(false)
    expect(marks(t).map((m) => m.label)).toEqual(['sent', 'answer started', 'first sentence'])
    expect(timing(steps, 'am_other')).toBeUndefined()
  })
})
