import { FakeServer } from '../testing/browser'
import { beforeEach, describe, expect, it, vi } from 'vitest'
import { createAppStore } from '../store/app'
import type { Conversation } from '../types'

const conv = (id: string, updatedAt = 1): Conversation => ({ id, title: `title ${id}`, status: 'active', createdAt: 1, updatedAt, lastClientStanzaId: 0 }) as Conversation

let server: FakeServer
beforeEach(() => {
  server = new FakeServer()
})

describe('conversations', () => {
  it('pages on from the cursor without showing one twice', async () => {
    server.on('GET /v1/conversations', () => {
      const cursor = server.requests.at(-1)!.query.get('cursor')
      return cursor === 'p2'
        ? { status: 200, body: { conversations: [conv('ac_2'), conv('ac_3')] } }
        : { status: 200, body: { conversations: [conv('ac_1'), conv('ac_2')], nextCursor: 'p2' } }
    })
    const s = createAppStore()
    await s.getState().loadConversations()
    await s.getState().loadConversations(false)
    expect(s.getState().conversations.map((c) => c.id)).toEqual(['ac_1', 'ac_2', 'ac_3'])
    expect(s.getState().nextCursor).toBeUndefined()
    // No cursor left: nothing more is asked.
    await s.getState().loadConversations(false)
    expect(server.requests).toHaveLength(2)
  })

  it('a newer filter wins over a slower older request', async () => {
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    server.on('GET /v1/conversations', async () => {
      const q = server.requests.at(-1)!.query.get('q')
      if (!q) {
        await held
        return { status: 200, body: { conversations: [conv('ac_old')] } }
      }
      return { status: 200, body: { conversations: [conv('ac_match')] } }
    })
    const s = createAppStore()
    const first = s.getState().loadConversations()
    s.getState().setFilter('match')
    await vi.waitFor(() => expect(s.getState().conversations).toHaveLength(1))
    release()
    await first
    expect(s.getState().conversations.map((c) => c.id)).toEqual(['ac_match'])
    expect(server.requests.at(-1)!.query.get('q')).toBe('match')
  })

  it('a list that cannot be read says why', async () => {
    server.on('GET /v1/conversations', { status: 500, body: { error: { message: 'the database is down' } } })
    const s = createAppStore()
    await s.getState().loadConversations()
    expect(s.getState()).toMatchObject({ listLoading: false, listError: 'the database is down' })
  })

  it('renaming changes the row and the open conversation; archiving takes the row away', async () => {
    server.on('PATCH /v1/conversations/ac_1', ({ body }) => ({ status: 200, body: { ...conv('ac_1'), ...(body as object) } }))
    const s = createAppStore()
    s.setState({ conversations: [conv('ac_1'), conv('ac_2')] })
    s.setState({ chat: { conversationId: 'ac_1', title: 'old' } as never })
    await s.getState().renameConversation('ac_1', 'new')
    expect(s.getState().conversations[0]!.title).toBe('new')
    expect(s.getState().chat?.title).toBe('new')
    await s.getState().archiveConversation('ac_1', true)
    expect(s.getState().conversations.map((c) => c.id)).toEqual(['ac_2'])
    expect(s.getState().chat?.status).toBe('archived')
  })

  it('a conversation written to moves to the top, as the server orders the list', () => {
    const s = createAppStore()
    s.setState({ conversations: [conv('ac_1', 3), conv('ac_2', 2), conv('ac_3', 1)] })
    s.getState().touchConversation('ac_3', 4)
    expect(s.getState().conversations.map((c) => c.id)).toEqual(['ac_3', 'ac_1', 'ac_2'])
    s.getState().touchConversation('ac_unknown', 5)
    expect(s.getState().conversations).toHaveLength(3)
  })
})
