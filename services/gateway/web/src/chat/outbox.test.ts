import { describe, expect, it } from 'vitest'
import { memoryStore, Outbox } from './outbox'

describe('Outbox', () => {
  it('keeps messages written offline across a reload, chained in order', async () => {
    const store = memoryStore()
    const a = new Outbox(store)
    await a.load()
    const first = await a.add('ac_1', 'one', 'am_last', 1000)
    const second = await a.add('ac_1', 'two', 'am_last', 2000)
    await a.add('ac_2', 'elsewhere', undefined, 1500)
    expect(second.previousId).toBe(first.localId)
    expect(second.sequenceNumber).toBe(first.sequenceNumber + 1)

    const reloaded = new Outbox(store)
    await reloaded.load()
    expect(reloaded.forConversation('ac_1').map((e) => [e.content, e.status])).toEqual([['one', 'waiting'], ['two', 'waiting']])
    const req = await reloaded.syncRequest('ac_1')
    expect(req?.messages.map((m) => [m.contents, m.sequenceNumber, m.previousId, m.role, m.createdAt])).toEqual([
      ['one', 1, 'am_last', 'user', 1000],
      ['two', 2, first.localId, 'user', 2000],
    ])
    expect(reloaded.forConversation('ac_1').every((e) => e.status === 'sending')).toBe(true)
    // Nothing more to send while those are out.
    expect(await reloaded.syncRequest('ac_1')).toBeUndefined()
  })

  it('settles a SyncResponse: synced messages leave, conflicts stay with what to do', async () => {
    const store = memoryStore()
    const o = new Outbox(store)
    await o.load()
    const a = await o.add('ac_1', 'one', 'am_x')
    const b = await o.add('ac_1', 'two')
    await o.syncRequest('ac_1')
    await o.settle({
      syncedAt: 5,
      syncedMessages: [
        { localId: a.localId, serverId: 'am_s1', status: 'synced' },
        { localId: b.localId, serverId: 'am_s2', status: 'conflict', conflict: { reason: 'too_long', message: 'shorten it' } },
      ],
    })
    const left = o.forConversation('ac_1')
    expect(left.map((e) => [e.content, e.status, e.conflict?.message])).toEqual([['two', 'conflict', 'shorten it']])
    expect((await store.all()).map((e) => e.localId)).toEqual([b.localId])
    // Sent again as a new message: waiting, following whatever the conversation shows then.
    o.retryAsNew(b.localId)
    const again = o.forConversation('ac_1')
    expect(again.map((e) => [e.content, e.status, e.previousId])).toEqual([['two', 'waiting', undefined]])
    expect(again[0]?.localId).not.toBe(b.localId)
  })

  it('sends again what a dropped connection left unsettled, and after a reload', async () => {
    const store = memoryStore()
    const o = new Outbox(store)
    await o.load()
    await o.add('ac_1', 'one')
    await o.syncRequest('ac_1')
    o.unsent('ac_1')
    expect(o.forConversation('ac_1')[0]?.status).toBe('waiting')
    await o.syncRequest('ac_1')
    const reloaded = new Outbox(store)
    await reloaded.load()
    expect(reloaded.forConversation('ac_1')[0]?.status).toBe('waiting')
  })

  it('tells its subscribers of every change', async () => {
    const o = new Outbox(memoryStore())
    await o.load()
    let n = 0
    const stop = o.subscribe(() => n++)
    const e = await o.add('ac_1', 'one')
    await o.remove(e.localId)
    stop()
    await o.add('ac_1', 'two')
    expect(n).toBe(2)
    expect(o.snapshot().length).toBe(1)
  })
})
