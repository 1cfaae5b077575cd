import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { MessageType, type Envelope } from '../protocol'
import { HOLD_MAX_MS, LiveChat, plan, TAIL_MAX_ROWS, tailRows, type ChatSource } from './live'
import { addLocalUserMessage, apply, emptyChat, type ChatMessage, type ChatState } from './model'
import type { ChatTail } from './tail'

const cid = 'ac_live'
let seq = 0
function server(type: number, body: object): Envelope {
  seq += 1
  return { stanzaId: -seq, conversationId: cid, type, body }
}
const start = (id: string, previousId: string) => server(MessageType.StartAnswer, { id, previousId, conversationId: cid })
const sentence = (answer: string, text: string, n = 1, isFinal = false) =>
  server(MessageType.AssistantSentence, { previousId: answer, conversationId: cid, sequence: n, text, isFinal })

// A conversation of one answered turn.
function answered(): ChatState {
  seq = 0
  let s = addLocalUserMessage(emptyChat(cid), 'am_u1', 'hi', 1)
  s = apply(s, start('am_a1', 'am_u1'), 1)
  return apply(s, sentence('am_a1', 'Hello.', 1, true), 1)
}

describe('plan: how a new state reaches the screen', () => {
  it('renders with React at once when no tail is in the page', () => {
    const shown = answered()
    expect(plan(shown, addLocalUserMessage(shown, 'am_u2', 'more', 2), false)).toBe('now')
  })

  it('keeps React off the path from the key press to the first sentence', () => {
    const shown = answered()
    const sent = addLocalUserMessage(shown, 'am_u2', 'more', 2)
    expect(plan(shown, sent, true)).toBe('hold')
    expect(tailRows(shown, sent).map((m) => m.id)).toEqual(['am_u2'])
    const started = apply(sent, start('am_a2', 'am_u2'), 3)
    expect(plan(shown, started, true)).toBe('hold')
    const first = apply(started, sentence('am_a2', 'First.'), 4)
    expect(plan(shown, first, true)).toBe('idle')
    expect(tailRows(shown, first).map((m) => [m.id, m.content])).toEqual([['am_u2', 'more'], ['am_a2', 'First.']])
  })

  it('lets React show an answer that has parts or an error before any sentence', () => {
    const before = answered()
    const started = apply(addLocalUserMessage(before, 'am_u2', 'more', 2), start('am_a2', 'am_u2'), 3)
    const tool = apply(started, server(MessageType.ToolUseRequest, { id: 'at_1', messageId: 'am_a2', conversationId: cid, toolName: 'calculator', parameters: {} }), 4)
    expect(plan(before, tool, true)).toBe('idle')
    const failed = apply(started, server(MessageType.ErrorMessage, { id: 'ae_1', conversationId: cid, code: 503, message: 'down', severity: 'error', recoverable: true, originatingId: 'am_a2' }), 4)
    expect(plan(before, failed, true)).toBe('idle')
  })

  it('renders changes to rows React shows in the next frame, and other branches at once', () => {
    const s = addLocalUserMessage(answered(), 'am_u2', 'more', 2)
    const started = apply(s, start('am_a2', 'am_u2'), 3)
    expect(plan(started, apply(started, sentence('am_a2', 'First.'), 4), true)).toBe('frame')
    // A regenerated answer replaces the last one: not rows added at the end.
    const regenerated = apply(started, start('am_a3', 'am_u2'), 5)
    expect(plan(started, regenerated, true)).toBe('now')
    expect(tailRows(started, regenerated)).toEqual([])
    expect(plan(started, emptyChat('ac_other'), true)).toBe('now')
    // A conversation loaded into the empty list, or many messages at once: React's.
    expect(plan(emptyChat(cid), started, true)).toBe('now')
    let many = started
    for (let i = 0; i < TAIL_MAX_ROWS + 1; i++) many = addLocalUserMessage(many, `am_m${i}`, 'again', 6)
    expect(plan(started, many, true)).toBe('now')
    expect(plan(started, null, true)).toBe('now')
    expect(plan(started, started, true)).toBe('none')
  })
})

// A store holding one chat, and a tail that notes what it was given.
function harness(initial: ChatState) {
  let chat: ChatState | null = initial
  const subs = new Set<() => void>()
  const source: ChatSource = {
    get: () => chat,
    subscribe: (fn) => (subs.add(fn), () => subs.delete(fn)),
  }
  const drawn: string[][] = []
  const tail = { render: (ms: ChatMessage[]) => drawn.push(ms.map((m) => m.id)), dispose: () => {} } as unknown as ChatTail
  const live = new LiveChat(source)
  let renders = 0
  live.subscribe(() => {
    renders += 1
    live.syncTail() // what the list's layout effect does after React's commit
  })
  live.mountTail(tail)
  return {
    live,
    drawn,
    renders: () => renders,
    set(next: ChatState | null) {
      chat = next
      for (const fn of subs) fn()
    },
    latest: () => chat!,
  }
}

describe('LiveChat', () => {
  beforeEach(() => {
    // Node has no frames nor idle callbacks: a frame every 16 ms, idle at once.
    vi.stubGlobal('requestAnimationFrame', (cb: FrameRequestCallback) => setTimeout(() => cb(performance.now()), 16))
    vi.stubGlobal('cancelAnimationFrame', (id: number) => clearTimeout(id))
    vi.stubGlobal('requestIdleCallback', (cb: IdleRequestCallback) => setTimeout(() => cb({ didTimeout: false, timeRemaining: () => 10 }), 1))
    vi.stubGlobal('cancelIdleCallback', (id: number) => clearTimeout(id))
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
  })
  afterEach(() => {
    vi.useRealTimers()
    vi.unstubAllGlobals()
  })

  it('draws a sent message and its first sentence in the tail, and React catches up when idle', () => {
    const h = harness(answered())
    const before = h.live.getShown()
    h.set(addLocalUserMessage(h.latest(), 'am_u2', 'more', 2))
    h.set(apply(h.latest(), start('am_a2', 'am_u2'), 3))
    h.set(apply(h.latest(), sentence('am_a2', 'First.'), 4))
    // Nothing rendered by React yet: the tail has both rows.
    expect(h.renders()).toBe(0)
    expect(h.live.getShown()).toBe(before)
    expect(h.drawn.at(-1)).toEqual(['am_u2', 'am_a2'])
    vi.advanceTimersByTime(200)
    expect(h.renders()).toBe(1)
    expect(h.live.getShown()).toBe(h.latest())
    // React's commit took the tail's rows away.
    expect(h.drawn.at(-1)).toEqual([])
  })

  it('shows a turn with React after HOLD_MAX_MS when the first sentence is slow', () => {
    const h = harness(answered())
    h.set(addLocalUserMessage(h.latest(), 'am_u2', 'more', 2))
    vi.advanceTimersByTime(HOLD_MAX_MS / 2)
    h.set(apply(h.latest(), start('am_a2', 'am_u2'), 3))
    vi.advanceTimersByTime(HOLD_MAX_MS / 2 - 1)
    expect(h.renders()).toBe(0)
    vi.advanceTimersByTime(1)
    expect(h.renders()).toBe(1)
    expect(h.live.getShown()?.order.at(-1)).toBe('am_a2')
  })

  it('renders another branch at once, and drops the tail', () => {
    const h = harness(answered())
    h.set(addLocalUserMessage(h.latest(), 'am_u2', 'more', 2))
    expect(h.drawn.at(-1)).toEqual(['am_u2'])
    h.set(emptyChat('ac_other'))
    expect(h.renders()).toBe(1)
    expect(h.live.getShown()?.conversationId).toBe('ac_other')
    expect(h.drawn.at(-1)).toEqual([])
  })

  it('renders what changes in rows React shows before the next frame, once for several changes', () => {
    const h = harness(apply(addLocalUserMessage(answered(), 'am_u2', 'more', 2), start('am_a2', 'am_u2'), 3))
    h.set(apply(h.latest(), sentence('am_a2', 'One.', 1), 4))
    h.set(apply(h.latest(), sentence('am_a2', 'Two.', 2), 4))
    expect(h.renders()).toBe(0)
    vi.advanceTimersByTime(16)
    expect(h.renders()).toBe(1)
    expect(h.live.getShown()?.byId.am_a2?.content).toBe('One. Two.')
  })

  it('renders everything when the list goes away', () => {
    const h = harness(answered())
    const tail = { render: () => {}, dispose: vi.fn() } as unknown as ChatTail
    h.live.mountTail(tail)
    h.set(addLocalUserMessage(h.latest(), 'am_u2', 'more', 2))
    expect(h.renders()).toBe(0)
    h.live.unmountTail(tail)
    expect(h.renders()).toBe(1)
    expect(tail.dispose).toHaveBeenCalled()
  })
})
