import { describe, expect, it } from 'vitest'
import { MessageType } from '../protocol'
import type { ConversationWithMessages } from '../types'
import { addCommentary, apply, fromSnapshot, mergeSnapshot } from './model'

const cid = 'ac_records'
const msg = (id: string, role: 'user' | 'assistant', previousId?: string) => ({
  id, previousId, role, content: id, status: 'completed' as const, interrupted: false, sequenceNumber: 0, createdAt: 1, siblingCount: 1,
})
const snap = (extra: Partial<ConversationWithMessages> = {}): ConversationWithMessages => ({
  id: cid, title: 'T', status: 'active', createdAt: 1, updatedAt: 1, messageCount: 2, lastClientStanzaId: 1,
  messages: [msg('am_u', 'user'), msg('am_a', 'assistant', 'am_u')], streamSeq: 5, ...extra,
})

describe('commentaries', () => {
  it('come from the snapshot, and a comment just sent survives a snapshot read before it was stored', () => {
    const stored = { id: 'aucc_1', messageId: 'am_a', content: 'Good', createdBy: 'alice', createdAt: 1 }
    let s = fromSnapshot(snap({ commentaries: [stored] }))
    expect(s.commentaries).toEqual([stored])
    const sent = { id: 'aucc_2', content: 'Whole talk', commentaryType: 'conversation', createdAt: 2 }
    s = addCommentary(s, sent)
    expect(addCommentary(s, sent)).toBe(s) // once
    const merged = mergeSnapshot(s, snap({ commentaries: [stored] }))
    expect(merged.commentaries?.map((c) => c.id)).toEqual(['aucc_1', 'aucc_2'])
    // Once stored, the server's copy (with its author) replaces it.
    const later = mergeSnapshot(merged, snap({ commentaries: [stored, { ...sent, createdBy: 'alice' }] }))
    expect(later.commentaries?.map((c) => c.createdBy)).toEqual(['alice', 'alice'])
  })
  it('a snapshot without any leaves no field', () => {
    expect(fromSnapshot(snap()).commentaries).toBeUndefined()
  })
})

describe('memory traces', () => {
  it('say which query found the memory', () => {
    const s = apply(fromSnapshot(snap()), {
      stanzaId: -6, conversationId: cid, type: MessageType.MemoryTrace,
      body: { id: 'amu_1', conversationId: cid, messageId: 'am_a', memoryId: 'amem_1', content: 'Likes tea', relevance: 0.8,
        queryPrompt: 'what do I drink?', queryPromptMeta: { prefetched: true, searchMs: 3 } },
    }, 1000)
    expect(s.byId['am_a']!.memoriesUsed).toEqual([{ id: 'amu_1', memoryId: 'amem_1', content: 'Likes tea', similarity: 0.8,
      queryPrompt: 'what do I drink?', queryPromptMeta: { prefetched: true, searchMs: 3 } }])
  })
})
