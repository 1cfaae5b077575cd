import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { decodeEnvelope, encodeEnvelope, MessageType, type Envelope } from '../protocol'
import { Connection, type ConnectionStatus } from './connection'

// FakeSocket stands in for the browser's WebSocket: it records frames and
// lets the test open, answer and drop it.
class FakeSocket {
  static CONNECTING = 0
  static OPEN = 1
  static CLOSING = 2
  static CLOSED = 3
  readyState = FakeSocket.CONNECTING
  binaryType = 'blob'
  sent: Envelope[] = []
  onopen: (() => void) | null = null
  onmessage: ((e: { data: ArrayBuffer }) => void) | null = null
  onclose: ((e: { code: number; reason: string }) => void) | null = null
  onerror: (() => void) | null = null
  open() {
    this.readyState = FakeSocket.OPEN
    this.onopen?.()
  }
  send(data: Uint8Array) {
    this.sent.push(decodeEnvelope(data))
  }
  receive(env: Envelope) {
    const b = encodeEnvelope(env)
    this.onmessage?.({ data: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer })
  }
  drop(code = 1006) {
    this.readyState = FakeSocket.CLOSED
    this.onclose?.({ code, reason: '' })
  }
  close() {
    this.readyState = FakeSocket.CLOSED
  }
}

const cid = 'ac_conn'
let sockets: FakeSocket[]
let statuses: ConnectionStatus[]
let lastSeq: number

function connection() {
  const c = new Connection(
    {
      conversationId: cid, stanzaBase: 7, lastSeq: () => lastSeq, url: 'ws://test/v1/ws', minDelay: 10, maxDelay: 40,
      socketFactory: () => {
        const s = new FakeSocket()
        sockets.push(s)
        return s as unknown as WebSocket
      },
    },
    { status: (s) => statuses.push(s), envelope: () => {} },
  )
  c.start()
  return c
}

function configure(s: FakeSocket, seq: number) {
  s.open()
  s.receive({ stanzaId: -seq, conversationId: cid, type: MessageType.Configuration, body: { conversationId: cid } })
}

beforeEach(() => {
  vi.useFakeTimers()
  vi.stubGlobal('WebSocket', FakeSocket)
  vi.stubGlobal('navigator', { onLine: true })
  sockets = []
  statuses = []
  lastSeq = 0
})
afterEach(() => {
  vi.useRealTimers()
  vi.unstubAllGlobals()
})

describe('connection', () => {
  it('opens with Configuration, numbering after the stored stanza ids, resuming after the last server envelope', () => {
    lastSeq = 41
    connection()
    configure(sockets[0]!, 42)
    const cfg = sockets[0]!.sent[0]!
    expect(cfg.type).toBe(MessageType.Configuration)
    expect(cfg.stanzaId).toBe(8)
    expect(cfg.body).toMatchObject({ conversationId: cid, lastSequenceSeen: -41 })
    expect(statuses).toEqual(['connecting', 'open'])
  })

  it('reconnects with backoff and resends a user message whose answer has not started, with the same stanza id', () => {
    const c = connection()
    configure(sockets[0]!, 1)
    c.send(MessageType.UserMessage, { id: 'am_q', conversationId: cid, content: 'hi' })
    const sent = sockets[0]!.sent[1]!
    sockets[0]!.drop()
    expect(statuses.at(-1)).toBe('reconnecting')
    vi.advanceTimersByTime(50)
    expect(sockets).toHaveLength(2)
    lastSeq = 5
    configure(sockets[1]!, 6)
    const [cfg, resent] = sockets[1]!.sent
    expect(cfg!.body).toMatchObject({ lastSequenceSeen: -5 })
    expect(resent).toEqual(sent) // JetStream drops it if it was stored
    // Once its answer starts, it is not sent again.
    sockets[1]!.receive({ stanzaId: -7, conversationId: cid, type: MessageType.StartAnswer, body: { id: 'am_a', previousId: 'am_q', conversationId: cid } })
    sockets[1]!.drop()
    vi.advanceTimersByTime(50)
    configure(sockets[2]!, 8)
    expect(sockets[2]!.sent.map((e) => e.type)).toEqual([MessageType.Configuration])
  })

  it('queues what is sent while disconnected and sends it once configured', () => {
    const c = connection()
    c.send(MessageType.ControlStop, { conversationId: cid, stopType: 'all' })
    expect(sockets[0]!.sent).toHaveLength(0)
    configure(sockets[0]!, 1)
    expect(sockets[0]!.sent.map((e) => e.type)).toEqual([MessageType.Configuration, MessageType.ControlStop])
  })

  it('closed when sent: a message sent before the socket opened still goes out, then the connection closes', () => {
    const c = connection()
    c.send(MessageType.UserMessage, { id: 'am_first', conversationId: cid, content: 'hello' })
    c.closeWhenSent()
    expect(sockets[0]!.readyState).toBe(FakeSocket.CONNECTING)
    configure(sockets[0]!, 1)
    expect(sockets[0]!.sent.map((e) => e.type)).toEqual([MessageType.Configuration, MessageType.UserMessage])
    expect(sockets[0]!.readyState).toBe(FakeSocket.CLOSED)
    vi.advanceTimersByTime(1000)
    expect(sockets).toHaveLength(1)
  })

  it('closed when sent: nothing waiting closes at once; a connection that never comes up is closed after the wait', () => {
    const idle = connection()
    configure(sockets[0]!, 1)
    idle.closeWhenSent()
    expect(sockets[0]!.readyState).toBe(FakeSocket.CLOSED)

    const down = connection()
    down.send(MessageType.UserMessage, { id: 'am_lost', conversationId: cid, content: 'hello' })
    down.closeWhenSent(500)
    sockets[1]!.drop() // it keeps reconnecting meanwhile
    vi.advanceTimersByTime(100)
    expect(sockets.length).toBeGreaterThan(2)
    vi.advanceTimersByTime(1000)
    const n = sockets.length
    vi.advanceTimersByTime(1000)
    expect(sockets).toHaveLength(n)
  })

  it('stops when closed, and does not reconnect', () => {
    const c = connection()
    configure(sockets[0]!, 1)
    c.close()
    vi.advanceTimersByTime(1000)
    expect(sockets).toHaveLength(1)
    expect(statuses.at(-1)).toBe('closed')
  })

  it.each([
    [4401, 'signed out: the session ended; sign in again'],
    [4404, 'conversation deleted'],
  ])('a revoked connection (%i) says why and does not reconnect', (code, reason) => {
    const revoked: [number, string][] = []
    const c = new Connection(
      {
        conversationId: cid, stanzaBase: 7, lastSeq: () => lastSeq, url: 'ws://test/v1/ws', minDelay: 10, maxDelay: 40,
        socketFactory: () => {
          const s = new FakeSocket()
          sockets.push(s)
          return s as unknown as WebSocket
        },
      },
      { status: (s) => statuses.push(s), envelope: () => {}, revoked: (code, reason) => revoked.push([code, reason]) },
    )
    c.start()
    configure(sockets[0]!, 1)
    const s = sockets[0]!
    s.readyState = FakeSocket.CLOSED
    s.onclose?.({ code, reason })
    vi.advanceTimersByTime(60_000)
    c.reconnectNow()
    vi.advanceTimersByTime(60_000)
    expect(sockets).toHaveLength(1)
    expect(statuses.at(-1)).toBe('closed')
    expect(revoked).toEqual([[code, reason]])
  })
})
