import { describe, expect, it } from 'vitest'
import { MessageType, type Envelope } from '../protocol'
import type { ConversationWithMessages } from '../types'
import { addLocalUserMessage, apply, emptyChat, fromSnapshot, mergeSnapshot, spokenView, streamingAnswer, visible, type ChatState } from './model'

const cid = 'ac_test'
let seq = 0
function server(type: number, body: object, stanza?: number): Envelope {
  seq = stanza ?? seq + 1
  return { stanzaId: -seq, conversationId: cid, type, body }
}
function run(s: ChatState, envs: Envelope[]): ChatState {
  return envs.reduce((acc, e) => apply(acc, e, 1000), s)
}
function snapshot(messages: ConversationWithMessages['messages'], streamSeq?: number): ConversationWithMessages {
  return { id: cid, title: 'T', status: 'active', createdAt: 1, updatedAt: 1, messageCount: messages.length, lastClientStanzaId: 3, messages, streamSeq }
}
const msg = (id: string, role: 'user' | 'assistant', content: string, previousId?: string) => ({
  id, previousId, role, content, status: 'completed' as const, interrupted: false, sequenceNumber: 0, createdAt: 1, siblingCount: 1,
})

describe('stream assembly', () => {
  it('assembles sentences in sequence order, whatever order they arrive in', () => {
    seq = 0
    let s = addLocalUserMessage(emptyChat(cid), 'am_u1', 'hi', 1)
    s = run(s, [
      server(MessageType.StartAnswer, { id: 'am_a1', previousId: 'am_u1', conversationId: cid }),
      server(MessageType.AssistantSentence, { previousId: 'am_a1', conversationId: cid, sequence: 2, text: 'Second.' }),
      server(MessageType.AssistantSentence, { previousId: 'am_a1', conversationId: cid, sequence: 1, text: 'First.' }),
    ])
    const a = s.byId['am_a1']!
    expect(a.content).toBe('First. Second.')
    expect(a.status).toBe('streaming')
    expect(streamingAnswer(s)?.id).toBe('am_a1')
    s = apply(s, server(MessageType.AssistantSentence, { previousId: 'am_a1', conversationId: cid, sequence: 3, text: 'Third.', isFinal: true }))
    expect(s.byId['am_a1']!.status).toBe('completed')
    expect(s.byId['am_a1']!.content).toBe('First. Second. Third.')
    expect(visible(s).map((m) => m.id)).toEqual(['am_u1', 'am_a1'])
    expect(streamingAnswer(s)).toBeUndefined()
  })

  it('keeps the lines of sentences that start with a line break', () => {
    seq = 0
    const s = run(emptyChat(cid), [
      server(MessageType.StartAnswer, { id: 'am_md', previousId: 'am_u', conversationId: cid }),
      ...['Fruit:', '\n- apples', '\n- pears', '\n\n| a | b |', '\n|---|---|', 'Done.'].map((text, i) =>
        server(MessageType.AssistantSentence, { previousId: 'am_md', conversationId: cid, sequence: i + 1, text })),
    ])
    expect(s.byId['am_md']!.content).toBe('Fruit:\n- apples\n- pears\n\n| a | b |\n|---|---| Done.')
  })

  it('waits for missing sentences before completing', () => {
    seq = 0
    let s = emptyChat(cid)
    s = run(s, [
      server(MessageType.StartAnswer, { id: 'am_a', previousId: 'am_u', conversationId: cid }),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 2, text: 'B.', isFinal: true }),
    ])
    expect(s.byId['am_a']!.status).toBe('streaming')
    s = apply(s, server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 1, text: 'A.' }))
    expect(s.byId['am_a']!.status).toBe('completed')
  })

  it('attaches tool uses, results, memory traces and reasoning to their answer', () => {
    seq = 0
    const s = run(emptyChat(cid), [
      server(MessageType.StartAnswer, { id: 'am_a', previousId: 'am_u', conversationId: cid }),
      server(MessageType.ReasoningStep, { id: 'ar_2', messageId: 'am_a', conversationId: cid, sequence: 2, content: 'then' }),
      server(MessageType.ReasoningStep, { id: 'ar_1', messageId: 'am_a', conversationId: cid, sequence: 1, content: 'first' }),
      server(MessageType.MemoryTrace, { id: 'amu_1', messageId: 'am_a', conversationId: cid, memoryId: 'amem_1', content: 'likes tea', relevance: 0.8 }),
      server(MessageType.ToolUseRequest, { id: 'atu_1', messageId: 'am_a', conversationId: cid, toolName: 'clock', parameters: {}, execution: 'server' }),
      server(MessageType.ToolUseResult, { id: 'atr_1', requestId: 'atu_1', conversationId: cid, success: false, errorCode: 'timeout', errorMessage: 'slow' }),
    ])
    const a = s.byId['am_a']!
    expect(a.reasoning?.map((r) => r.content)).toEqual(['first', 'then'])
    expect(a.memoriesUsed).toEqual([{ id: 'amu_1', memoryId: 'amem_1', content: 'likes tea', similarity: 0.8 }])
    expect(a.toolUses?.[0]).toMatchObject({ toolName: 'clock', status: 'error', errorCode: 'timeout', errorMessage: 'slow' })
  })

  it('shows an error naming an answer on it, and others apart', () => {
    seq = 0
    let s = run(emptyChat(cid), [
      server(MessageType.StartAnswer, { id: 'am_a', previousId: 'am_u', conversationId: cid }),
      server(MessageType.ErrorMessage, { id: 'aerr_1', conversationId: cid, code: 503, message: 'down', severity: 2, recoverable: true, originatingId: 'am_a' }),
    ])
    expect(s.byId['am_a']!.status).toBe('failed')
    expect(s.byId['am_a']!.error).toEqual({ code: 503, message: 'down', recoverable: true })
    s = apply(s, { type: MessageType.ErrorMessage, body: { id: 'aerr_2', conversationId: cid, code: 103, message: 'bad', severity: 2, recoverable: true } })
    expect(s.errors.map((e) => e.code)).toEqual([103])
  })

  it('marks a stopped answer interrupted', () => {
    seq = 0
    const s = run(emptyChat(cid), [
      server(MessageType.StartAnswer, { id: 'am_a', previousId: 'am_u', conversationId: cid }),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 1, text: 'Partial.' }),
      server(MessageType.ControlStop, { conversationId: cid, targetId: 'am_a', stopType: 'all' }),
    ])
    expect(s.byId['am_a']).toMatchObject({ status: 'completed', interrupted: true, content: 'Partial.' })
  })
})

describe('reconnect de-duplication', () => {
  it('ignores envelopes at or below the last applied stream sequence', () => {
    seq = 0
    const envs = [
      server(MessageType.StartAnswer, { id: 'am_a', previousId: 'am_u', conversationId: cid }),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 1, text: 'One.' }),
      server(MessageType.ToolUseRequest, { id: 'atu_1', messageId: 'am_a', conversationId: cid, toolName: 't', parameters: {}, execution: 'server' }),
    ]
    const once = run(emptyChat(cid), envs)
    // The server resends what followed lastSequenceSeen; an overlap is a no-op.
    const twice = run(once, envs)
    expect(twice).toBe(once)
    expect(once.lastSeq).toBe(3)
    const more = apply(once, server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 2, text: 'Two.', isFinal: true }))
    expect(more.byId['am_a']!.content).toBe('One. Two.')
  })

  it('continues an answer the snapshot caught mid-stream without doubling a sentence', () => {
    seq = 10
    const snap = snapshot([msg('am_u', 'user', 'hi'), { ...msg('am_a', 'assistant', 'One.', 'am_u'), status: 'streaming', sentences: [{ sequence: 1, text: 'One.' }] }], 10)
    let s = fromSnapshot(snap)
    expect(s.lastSeq).toBe(10)
    s = run(s, [
      // Stored before the snapshot was read, sent again after streamSeq.
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 1, text: 'One.' }, 11),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 2, text: 'Two.', isFinal: true }, 12),
    ])
    expect(s.byId['am_a']).toMatchObject({ content: 'One. Two.', status: 'completed' })
  })

  it('does not truncate an answer the snapshot has whole', () => {
    seq = 5
    let s = fromSnapshot(snapshot([msg('am_u', 'user', 'hi'), msg('am_a', 'assistant', 'One. Two.', 'am_u')], 5))
    s = apply(s, server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 2, text: 'Two.', isFinal: true }, 6))
    expect(s.byId['am_a']!.content).toBe('One. Two.')
  })

  it('keeps a message sent but not yet stored across a fresher snapshot', () => {
    let s = fromSnapshot(snapshot([msg('am_u', 'user', 'hi')], 1))
    s = addLocalUserMessage(s, 'am_u2', 'again', 2)
    s = mergeSnapshot(s, snapshot([msg('am_u', 'user', 'hi')], 1))
    expect(visible(s).map((m) => m.id)).toEqual(['am_u', 'am_u2'])
  })
})

describe('branches', () => {
  it('a regenerated answer replaces the old one on screen and carries the sibling count', () => {
    seq = 0
    let s = fromSnapshot(snapshot([msg('am_u', 'user', 'hi'), msg('am_a', 'assistant', 'Old.', 'am_u')]))
    s = run(s, [
      server(MessageType.BranchUpdate, { conversationId: cid, parentMessageId: 'am_u', newSibling: { id: 'am_b', content: '', createdAt: 2 }, siblingIds: ['am_a', 'am_b'] }),
      server(MessageType.StartAnswer, { id: 'am_b', previousId: 'am_u', conversationId: cid }),
      server(MessageType.AssistantSentence, { previousId: 'am_b', conversationId: cid, sequence: 1, text: 'New.', isFinal: true }),
    ])
    expect(visible(s).map((m) => m.id)).toEqual(['am_u', 'am_b'])
    expect(s.byId['am_b']).toMatchObject({ content: 'New.', siblingCount: 2 })
    expect(s.byId['am_a']!.siblingCount).toBe(2)
  })

  it('an edit puts the new user message after the same parent and drops the old tail', () => {
    seq = 0
    let s = fromSnapshot(snapshot([msg('am_u1', 'user', 'a'), msg('am_a1', 'assistant', 'A.', 'am_u1'), msg('am_u2', 'user', 'b', 'am_a1'), msg('am_a2', 'assistant', 'B.', 'am_u2')]))
    s = run(s, [
      server(MessageType.UserMessage, { id: 'am_u2b', previousId: 'am_a1', conversationId: cid, content: 'b edited' }),
      server(MessageType.BranchUpdate, { conversationId: cid, parentMessageId: 'am_a1', newSibling: { id: 'am_u2b', content: 'b edited', createdAt: 3 }, siblingIds: ['am_u2', 'am_u2b'] }),
      server(MessageType.StartAnswer, { id: 'am_a3', previousId: 'am_u2b', conversationId: cid }),
    ])
    expect(visible(s).map((m) => m.id)).toEqual(['am_u1', 'am_a1', 'am_u2b', 'am_a3'])
    expect(s.byId['am_u2b']!.siblingCount).toBe(2)
  })
})

describe('voice', () => {
  const playout = (messageId: string, sequence: number, status: string, playedMs = 0): Envelope =>
    ({ stanzaId: 0, conversationId: cid, type: MessageType.SentencePlayout, body: { conversationId: cid, messageId, sentenceId: `ams_${sequence}`, sequence, status, playedMs } })

  it('takes the final transcript as the user message, partials as the live line', () => {
    seq = 0
    let s = fromSnapshot(snapshot([msg('am_u0', 'user', 'typed'), msg('am_a0', 'assistant', 'answer', 'am_u0')]))
    s = run(s, [server(MessageType.Transcription, { id: 'am_v1', conversationId: cid, text: 'what is', final: false })])
    expect(s.partial).toBe('what is')
    expect(s.byId['am_v1']).toBeUndefined()
    s = run(s, [server(MessageType.Transcription, { id: 'am_v1', conversationId: cid, text: 'what is the time?', final: true })])
    expect(s.partial).toBeUndefined()
    expect(visible(s).map((m) => [m.id, m.role, m.content, m.voice])).toEqual([
      ['am_u0', 'user', 'typed', undefined], ['am_a0', 'assistant', 'answer', undefined], ['am_v1', 'user', 'what is the time?', true],
    ])
    expect(s.byId['am_v1']!.previousId).toBe('am_a0')
    // An empty final transcript (nothing understood) is no message.
    const empty = apply(s, server(MessageType.Transcription, { id: 'am_v2', conversationId: cid, text: ' ', final: true }))
    expect(empty.byId['am_v2']).toBeUndefined()
  })

  it('follows the playout marks: the sentence being heard, then what was heard and not after a barge-in', () => {
    seq = 0
    let s = run(emptyChat(cid), [
      server(MessageType.StartAnswer, { id: 'am_a', previousId: 'am_v', conversationId: cid }),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 1, text: 'One.' }),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 2, text: 'Two.' }),
      server(MessageType.AssistantSentence, { previousId: 'am_a', conversationId: cid, sequence: 3, text: 'Three.', isFinal: true }),
    ])
    expect(spokenView(s.byId['am_a']!)).toBeUndefined()
    const last = s.lastSeq
    s = run(s, [playout('am_a', 1, 'playing')])
    expect(s.lastSeq).toBe(last) // marks are not stream envelopes
    let v = spokenView(s.byId['am_a']!)!
    expect(v.sentences.map((x) => x.playout)).toEqual(['playing', 'pending', 'pending'])
    expect(v.cut).toBe(false)
    expect(v.heard).toBe('One.')
    s = run(s, [playout('am_a', 1, 'played', 900), playout('am_a', 2, 'playing'), playout('am_a', 2, 'interrupted', 300), playout('am_a', 3, 'unplayed')])
    v = spokenView(s.byId['am_a']!)!
    expect(v.cut).toBe(true)
    expect(v.heard).toBe('One. Two.')
    expect(v.notHeard).toBe('Three.')
    expect(s.byId['am_a']!.interrupted).toBe(true)
  })

  it('shows a stored spoken answer the same way', () => {
    const a = {
      ...msg('am_a', 'assistant', 'One.', 'am_u'),
      interrupted: true,
      spoken: [
        { sequence: 1, text: 'One.', playout: 'played' as const, playedMs: 900 },
        { sequence: 2, text: 'Two.', playout: 'unplayed' as const, playedMs: 0 },
      ],
    }
    const s = fromSnapshot(snapshot([msg('am_u', 'user', 'hi'), a]))
    const v = spokenView(s.byId['am_a']!)!
    expect([v.cut, v.heard, v.notHeard]).toEqual([true, 'One.', 'Two.'])
  })
})

describe('last voice call', () => {
  it('comes from the snapshot, then from a SessionStats as a call ends, and survives a snapshot that has none yet', () => {
    seq = 0
    const snap = snapshot([msg('am_u1', 'user', 'hi')])
    let s = fromSnapshot({ ...snap, lastVoiceSession: { messageCount: 2, toolCallCount: 0, memoriesUsed: 1, durationMs: 30000, startedAt: 1, endedAt: 30001 } })
    expect(s.lastCall).toEqual({ messageCount: 2, toolCallCount: 0, memoriesUsed: 1, durationMs: 30000 })
    s = apply(s, server(MessageType.SessionStats, { messageCount: 6, toolCallCount: 2, memoriesUsed: 3, sessionDurationMs: 185000 }))
    expect(s.lastCall).toEqual({ messageCount: 6, toolCallCount: 2, memoriesUsed: 3, durationMs: 185000 })
    // A snapshot read before persistence stored the stats keeps the live one.
    s = mergeSnapshot(s, snap)
    expect(s.lastCall?.messageCount).toBe(6)
  })
})
