import { FakeServer, FakeSocket } from '../testing/browser'
import { beforeEach, describe, expect, it } from 'vitest'
import { createAppStore } from './app'

const conv = (id: string, updatedAt = 1) => ({
  id, title: `title ${id}`, status: 'active', createdAt: 1, updatedAt, lastClientStanzaId: 0, messages: [],
})

let server: FakeServer
beforeEach(() => {
  server = new FakeServer()
  FakeSocket.made = []
})

describe('createAppStore', () => {
  it('makes stores that share nothing: each owns its open conversation and its WebSocket', async () => {
    server.on('GET /v1/conversations/ac_1', { status: 200, body: conv('ac_1') })
    const a = createAppStore()
    const b = createAppStore()
    await a.getState().openConversation('ac_1')

    expect(a.getState().chat?.conversationId).toBe('ac_1')
    expect(a.getState().conn).not.toBeNull()
    expect(FakeSocket.made).toHaveLength(1)
    expect(b.getState().chat).toBeNull()
    expect(b.getState().conn).toBeNull()

    // Closing b's (nothing) leaves a's connection alone; closing a's closes it.
    b.getState().closeConversation()
    expect(FakeSocket.made[0]!.readyState).not.toBe(FakeSocket.CLOSED)
    a.getState().closeConversation()
    expect(a.getState().conn).toBeNull()
    expect(FakeSocket.made[0]!.readyState).toBe(FakeSocket.CLOSED)
  })

  it('a conversation opened after another closes the first one’s WebSocket', async () => {
    server.on('GET /v1/conversations/ac_1', { status: 200, body: conv('ac_1') }).on('GET /v1/conversations/ac_2', { status: 200, body: conv('ac_2') })
    const s = createAppStore()
    await s.getState().openConversation('ac_1')
    await s.getState().openConversation('ac_2')
    expect(FakeSocket.made).toHaveLength(2)
    expect(FakeSocket.made[0]!.readyState).toBe(FakeSocket.CLOSED)
    expect(s.getState().chat?.conversationId).toBe('ac_2')
  })

  it('says why a conversation cannot be opened', async () => {
    server.on('GET /v1/conversations/ac_theirs', { status: 403, body: { error: { message: 'not yours' } } })
      .on('GET /v1/conversations/ac_down', { status: 500, body: { error: { message: 'the database is down' } } })
    const s = createAppStore()
    await s.getState().openConversation('ac_theirs')
    expect(s.getState().chatLoad).toBe('forbidden')
    await s.getState().openConversation('ac_gone')
    expect(s.getState().chatLoad).toBe('missing')
    await s.getState().openConversation('ac_down')
    expect(s.getState()).toMatchObject({ chatLoad: 'error', chatError: 'the database is down' })
    expect(FakeSocket.made).toHaveLength(0)
  })
})
