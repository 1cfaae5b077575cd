import { beforeEach, describe, expect, it, vi } from 'vitest'
import { MessageType } from '../protocol'
import { firedText, timerEnvelope, useTimers } from './timers'

describe('timers', () => {
  beforeEach(() => {
    useTimers.setState({ toasts: [], announced: new Set(), timers: [] })
    vi.stubGlobal('fetch', vi.fn(async () => new Response(JSON.stringify({ timers: [] }), { status: 200 })))
  })

  it('announces a timer message of the open conversation once', () => {
    const env = {
      type: MessageType.AssistantSentence,
      conversationId: 'ac_1',
      meta: { 'alicia.timer_id': 'atm_1' },
      body: { previousId: 'am_1', conversationId: 'ac_1', sequence: 1, text: 'Your 10-minute timer for tea is done.', isFinal: true },
    }
    timerEnvelope(env)
    timerEnvelope(env) // the same sentence again (a resend after a reconnect)
    expect(useTimers.getState().toasts).toEqual([{ id: 'atm_1', text: 'Your 10-minute timer for tea is done.', conversationId: 'ac_1' }])
  })

  it('ignores envelopes without a timer', () => {
    timerEnvelope({ type: MessageType.AssistantSentence, conversationId: 'ac_1', body: { previousId: 'am_1', conversationId: 'ac_1', sequence: 1, text: 'Hello.' } })
    timerEnvelope({ type: MessageType.StartAnswer, conversationId: 'ac_1', meta: { 'alicia.timer_id': 'atm_2' }, body: { id: 'am_2', previousId: 'am_1', conversationId: 'ac_1' } })
    expect(useTimers.getState().toasts).toEqual([])
  })

  it('announces what fired since the page opened, not before', async () => {
    const loadedAt = Date.now()
    const base = { conversationId: 'ac_1', dueAt: loadedAt, timeZone: 'UTC', createdAt: loadedAt - 60_000 }
    vi.stubGlobal('fetch', vi.fn(async () => new Response(JSON.stringify({ timers: [
      { ...base, id: 'atm_old', kind: 'timer', label: 'eggs', status: 'fired', endedAt: loadedAt - 1000 },
      { ...base, id: 'atm_new', kind: 'reminder', label: 'call Anna', status: 'fired', endedAt: loadedAt + 1000 },
    ] }), { status: 200 })))
    useTimers.setState({ timers: undefined, loadedAt })
    await useTimers.getState().refresh()
    expect(useTimers.getState().toasts.map((t) => t.text)).toEqual(['Reminder: call Anna.'])
  })

  it('words a fired timer', () => {
    const t = { id: 'a', conversationId: 'c', dueAt: 0, timeZone: 'UTC', createdAt: 0, status: 'fired' as const }
    expect(firedText({ ...t, kind: 'timer', label: '' })).toBe('Your timer is done.')
    expect(firedText({ ...t, kind: 'reminder', label: 'water the plants' })).toBe('Reminder: water the plants.')
  })
})
