// The conversation as the page shows it: the messages of the branch on
// screen, assembled from the REST snapshot and then from the server's
// envelopes as they stream in. Pure functions, so reconnects, duplicates
// and branch switches are tested without a browser.
import type {
  AssistantMessage, AssistantSentence, BranchUpdate, ControlStop, ConversationUpdate, Envelope, ErrorMessage,
  MemoryTrace, ReasoningStep, SentencePlayout, SessionStats, StartAnswer, ToolUseRequest, ToolUseResult, Transcription, UserMessage,
} from '../protocol'
import { MessageType } from '../protocol'
import type { Commentary, ConversationWithMessages, Message, Playout } from '../types'

export interface ChatError {
  code: number
  message: string
  recoverable: boolean
}

export interface ChatMessage extends Omit<Message, 'sentences'> {
  // Sentences of an answer being streamed, by sequence.
  sentences?: Record<number, string>
  finalSequence?: number
  error?: ChatError
  // Set on messages the page sent and the server has not confirmed.
  local?: boolean
  // A user message that was spoken (its final transcript).
  voice?: boolean
}

export interface ChatState {
  conversationId: string
  title: string
  status: string
  // Message ids of the branch on screen, root first.
  order: string[]
  byId: Record<string, ChatMessage>
  // The highest server stream sequence applied (stanza ids are its negation):
  // a reconnect asks for what follows it, and anything at or below it is a
  // duplicate.
  lastSeq: number
  // Errors not tied to an answer, newest last.
  errors: (ChatError & { id: string })[]
  // The live partial transcript of the user's speech, if any.
  partial?: string
  // Sibling counts announced by a BranchUpdate before the sibling arrived.
  siblingHints: Record<string, number>
  // The last voice call that ended (its SessionStats), if any.
  lastCall?: LastCall
  // The person's comments on the conversation and its messages, oldest first.
  commentaries?: Commentary[]
}

// LastCall is what a voice session amounted to: the messages of its turns,
// the tool calls and memories its answers used, and how long it lasted.
export interface LastCall {
  messageCount: number
  toolCallCount: number
  memoriesUsed: number
  durationMs: number
}

export function emptyChat(conversationId: string): ChatState {
  return { conversationId, title: '', status: 'active', order: [], byId: {}, lastSeq: 0, errors: [], siblingHints: {} }
}

// fromSnapshot builds the state from GET /v1/conversations/{id}; lastSeq
// carries over (the snapshot has no stream position).
export function fromSnapshot(c: ConversationWithMessages, lastSeq = c.streamSeq ?? 0): ChatState {
  const byId: Record<string, ChatMessage> = {}
  for (const m of c.messages) {
    const { sentences, ...rest } = m
    const cm: ChatMessage = { ...rest }
    // An answer still streaming comes with its stored sentences, so the
    // envelopes that follow (some already stored) continue it exactly.
    if (sentences) cm.sentences = Object.fromEntries(sentences.map((x) => [x.sequence, x.text]))
    byId[m.id] = cm
  }
  const v = c.lastVoiceSession
  return {
    conversationId: c.id, title: c.title, status: c.status, order: c.messages.map((m) => m.id), byId, lastSeq, errors: [], siblingHints: {},
    ...(v ? { lastCall: { messageCount: v.messageCount, toolCallCount: v.toolCallCount, memoriesUsed: v.memoriesUsed, durationMs: v.durationMs } } : {}),
    ...(c.commentaries?.length ? { commentaries: c.commentaries } : {}),
  }
}

// addCommentary adds a comment the person just sent (the server does not
// echo a client's Commentary; the next snapshot has it).
export function addCommentary(s: ChatState, c: Commentary): ChatState {
  if (s.commentaries?.some((x) => x.id === c.id)) return s
  return { ...s, commentaries: [...(s.commentaries ?? []), c] }
}

// mergeSnapshot replaces the messages with a fresher snapshot but keeps the
// answers still streaming and the messages sent but not yet stored.
export function mergeSnapshot(s: ChatState, c: ConversationWithMessages): ChatState {
  const next = fromSnapshot(c, Math.max(s.lastSeq, c.streamSeq ?? 0))
  for (const id of s.order) {
    const m = s.byId[id]
    if (!m || next.byId[id]) continue
    if (m.status === 'streaming' || m.local) {
      next.byId[id] = m
      const at = m.previousId ? next.order.indexOf(m.previousId) : -1
      if (m.previousId === undefined || at === next.order.length - 1) next.order.push(id)
    }
  }
  for (const id of next.order) {
    const old = s.byId[id]
    const m = next.byId[id]
    if (old && m && old.status === 'streaming' && m.status !== 'completed' && m.status !== 'failed') next.byId[id] = { ...m, ...pickLive(old) }
  }
  next.errors = s.errors
  if (!next.lastCall && s.lastCall) next.lastCall = s.lastCall
  // Comments sent since the snapshot was read stay.
  const sent = (s.commentaries ?? []).filter((x) => !next.commentaries?.some((y) => y.id === x.id))
  if (sent.length) next.commentaries = [...(next.commentaries ?? []), ...sent]
  return next
}

function pickLive(m: ChatMessage): Partial<ChatMessage> {
  return { sentences: m.sentences, finalSequence: m.finalSequence, content: m.content, status: m.status }
}

// placeAfter puts id on the branch right after previousId, dropping what
// followed it (a new answer or a variation starts a new branch there).
function placeAfter(order: string[], previousId: string | undefined, id: string): string[] {
  if (order.includes(id)) return order
  if (previousId === undefined) return [...order, id]
  const at = order.indexOf(previousId)
  if (at < 0) return [...order, id]
  return [...order.slice(0, at + 1), id]
}

function withMessage(s: ChatState, id: string, fn: (m: ChatMessage) => ChatMessage): ChatState {
  const m = s.byId[id]
  if (!m) return s
  return { ...s, byId: { ...s.byId, [id]: fn(m) } }
}

// assemble joins an answer's sentences as the server does (pkg/sentence
// Join): a space between two, none before a sentence that starts with its
// own line break, so lists, tables and code blocks keep their lines.
export function assemble(sentences: Record<number, string>): string {
  let out = ''
  for (const k of Object.keys(sentences).map(Number).sort((a, b) => a - b)) {
    const t = sentences[k] ?? ''
    if (t === '') continue
    out += out !== '' && !t.startsWith('\n') ? ' ' + t : t
  }
  return out
}

function newAnswer(id: string, previousId: string | undefined, at: number): ChatMessage {
  return {
    id, previousId, role: 'assistant', content: '', status: 'streaming', interrupted: false, sequenceNumber: 0,
    createdAt: at, siblingCount: 1, sentences: {},
  }
}

function ensureAnswer(s: ChatState, id: string, at: number): ChatState {
  if (s.byId[id]) return s
  return { ...s, byId: { ...s.byId, [id]: newAnswer(id, undefined, at) } }
}

// addLocalUserMessage shows a message the page sends before the server has it.
export function addLocalUserMessage(s: ChatState, id: string, content: string, at: number): ChatState {
  const previousId = s.order.at(-1)
  const m: ChatMessage = {
    id, previousId, role: 'user', content, status: 'completed', interrupted: false, sequenceNumber: 0, createdAt: at,
    siblingCount: 1, local: true,
  }
  return { ...s, order: placeAfter(s.order, previousId, id), byId: { ...s.byId, [id]: m } }
}

// apply folds one server envelope into the state. now stamps live timing.
export function apply(s: ChatState, env: Envelope, now: number = Date.now()): ChatState {
  const stanza = env.stanzaId ?? 0
  if (stanza < 0) {
    const seq = -stanza
    if (seq <= s.lastSeq) return s // already applied: a resend after reconnect
    s = { ...s, lastSeq: seq }
  }
  switch (env.type) {
    case MessageType.StartAnswer: {
      const b = env.body as StartAnswer
      const existing = s.byId[b.id]
      const m = existing ? { ...existing, previousId: b.previousId } : newAnswer(b.id, b.previousId, now)
      const hint = s.siblingHints[b.id]
      if (hint !== undefined) m.siblingCount = hint
      const byId = { ...s.byId, [b.id]: m }
      // The answer's start confirms the message it answers: the server has it.
      const asked = b.previousId ? s.byId[b.previousId] : undefined
      if (asked?.local) byId[asked.id] = { ...asked, local: false }
      return { ...s, order: placeAfter(s.order, b.previousId, b.id), byId }
    }
    case MessageType.AssistantSentence: {
      const b = env.body as AssistantSentence
      const known = s.byId[b.previousId]
      // An answer the snapshot already has whole: the envelope is a replay.
      if (known && known.sentences === undefined && (known.status === 'completed' || known.status === 'failed')) return s
      s = ensureAnswer(s, b.previousId, now)
      if (!s.order.includes(b.previousId)) s = { ...s, order: placeAfter(s.order, s.byId[b.previousId]?.previousId, b.previousId) }
      return withMessage(s, b.previousId, (m) => {
        const sentences = { ...(m.sentences ?? {}), [b.sequence]: b.text }
        const finalSequence = b.isFinal ? b.sequence : m.finalSequence
        const done = finalSequence !== undefined && Object.keys(sentences).length >= finalSequence
        return {
          ...m, sentences, finalSequence, content: assemble(sentences),
          status: done ? (m.status === 'failed' ? 'failed' : 'completed') : m.status === 'pending' ? 'streaming' : m.status,
        }
      })
    }
    case MessageType.AssistantMessage: {
      const b = env.body as AssistantMessage
      s = ensureAnswer(s, b.id, now)
      s = { ...s, order: placeAfter(s.order, b.previousId ?? s.byId[b.id]?.previousId, b.id) }
      return withMessage(s, b.id, (m) => ({ ...m, content: b.content, status: 'completed' }))
    }
    case MessageType.UserMessage: {
      // A user message on the server subject: an edit made a new sibling,
      // or a voice transcript.
      const b = env.body as UserMessage
      const m: ChatMessage = {
        ...(s.byId[b.id] ?? {
          id: b.id, role: 'user', interrupted: false, sequenceNumber: 0, createdAt: b.timestamp ?? now,
          siblingCount: s.siblingHints[b.id] ?? 1,
        }),
        previousId: b.previousId, content: b.content, status: 'completed', local: false,
      }
      return { ...s, order: placeAfter(s.order, b.previousId, b.id), byId: { ...s.byId, [b.id]: m }, partial: undefined }
    }
    case MessageType.Transcription: {
      const b = env.body as Transcription
      if (!b.final) return { ...s, partial: b.text }
      // The final transcript is the user's spoken message (the asr stores it
      // under the same id); an empty one (nothing understood) is none.
      if (!b.text.trim() || s.byId[b.id]) return { ...s, partial: undefined }
      const previousId = b.previousId ?? s.order.at(-1)
      const m: ChatMessage = {
        id: b.id, previousId, role: 'user', content: b.text, status: 'completed', interrupted: false, sequenceNumber: 0,
        createdAt: now, siblingCount: s.siblingHints[b.id] ?? 1, voice: true,
      }
      return { ...s, order: placeAfter(s.order, previousId, b.id), byId: { ...s.byId, [b.id]: m }, partial: undefined }
    }
    case MessageType.SentencePlayout: {
      // From the room-agent on the data channel: a sentence of a spoken
      // answer started playing, played to its end, was cut off or never
      // played.
      const b = env.body as SentencePlayout
      s = ensureAnswer(s, b.messageId, now)
      return withMessage(s, b.messageId, (m) => {
        const spoken = (m.spoken ?? []).filter((x) => x.sequence !== b.sequence)
        const text = m.sentences?.[b.sequence] ?? m.spoken?.find((x) => x.sequence === b.sequence)?.text ?? ''
        spoken.push({ sequence: b.sequence, text, playout: b.status, playedMs: b.playedMs })
        spoken.sort((x, y) => x.sequence - y.sequence)
        const cut = b.status === 'interrupted' || b.status === 'unplayed'
        return { ...m, spoken, interrupted: m.interrupted || cut }
      })
    }
    case MessageType.ReasoningStep: {
      const b = env.body as ReasoningStep
      s = ensureAnswer(s, b.messageId, now)
      return withMessage(s, b.messageId, (m) => {
        const rest = (m.reasoning ?? []).filter((r) => r.sequence !== b.sequence)
        return { ...m, reasoning: [...rest, { id: b.id, sequence: b.sequence, content: b.content }].sort((x, y) => x.sequence - y.sequence) }
      })
    }
    case MessageType.ToolUseRequest: {
      const b = env.body as ToolUseRequest
      s = ensureAnswer(s, b.messageId, now)
      return withMessage(s, b.messageId, (m) => {
        if ((m.toolUses ?? []).some((t) => t.id === b.id)) return m
        return { ...m, toolUses: [...(m.toolUses ?? []), { id: b.id, toolName: b.toolName, arguments: b.parameters, status: 'pending', startedAt: now }] }
      })
    }
    case MessageType.ToolUseResult: {
      const b = env.body as ToolUseResult
      const owner = s.order.map((id) => s.byId[id]).find((m) => m?.toolUses?.some((t) => t.id === b.requestId))
      if (!owner) return s
      return withMessage(s, owner.id, (m) => ({
        ...m,
        toolUses: (m.toolUses ?? []).map((t) =>
          t.id !== b.requestId
            ? t
            : { ...t, status: b.success ? 'success' : 'error', result: b.result, errorCode: b.errorCode, errorMessage: b.errorMessage, finishedAt: now },
        ),
      }))
    }
    case MessageType.MemoryTrace: {
      const b = env.body as MemoryTrace
      s = ensureAnswer(s, b.messageId, now)
      return withMessage(s, b.messageId, (m) => {
        if ((m.memoriesUsed ?? []).some((u) => u.memoryId === b.memoryId)) return m
        return {
          ...m,
          memoriesUsed: [...(m.memoriesUsed ?? []), {
            id: b.id, memoryId: b.memoryId, content: b.content, similarity: b.relevance,
            ...(b.queryPrompt ? { queryPrompt: b.queryPrompt } : {}), ...(b.queryPromptMeta ? { queryPromptMeta: b.queryPromptMeta } : {}),
          }],
        }
      })
    }
    case MessageType.ControlStop: {
      const b = env.body as ControlStop
      const target = b.targetId ?? s.order.map((id) => s.byId[id]).findLast((m) => m?.status === 'streaming')?.id
      if (!target) return s
      return withMessage(s, target, (m) => (m.status === 'streaming' || m.status === 'pending' ? { ...m, status: 'completed', interrupted: true } : m))
    }
    case MessageType.ErrorMessage: {
      const b = env.body as ErrorMessage
      const err: ChatError = { code: b.code, message: b.message, recoverable: b.recoverable }
      if (b.originatingId && s.byId[b.originatingId]) {
        return withMessage(s, b.originatingId, (m) => ({ ...m, error: err, status: m.role === 'assistant' ? 'failed' : m.status }))
      }
      return { ...s, errors: [...s.errors.filter((e) => e.id !== b.id), { ...err, id: b.id }].slice(-5) }
    }
    case MessageType.ConversationUpdate: {
      const b = env.body as ConversationUpdate
      return { ...s, title: b.title ?? s.title, status: b.status ?? s.status }
    }
    case MessageType.SessionStats: {
      const b = env.body as SessionStats
      return { ...s, lastCall: { messageCount: b.messageCount, toolCallCount: b.toolCallCount, memoriesUsed: b.memoriesUsed, durationMs: b.sessionDurationMs } }
    }
    case MessageType.BranchUpdate: {
      const b = env.body as BranchUpdate
      const n = b.siblingIds.length
      const byId = { ...s.byId }
      for (const id of b.siblingIds) {
        const m = byId[id]
        if (m) byId[id] = { ...m, siblingCount: n }
      }
      // A sibling not here yet (its envelopes follow) takes the count then.
      return { ...s, byId, siblingHints: byId[b.newSibling.id] ? s.siblingHints : { ...s.siblingHints, [b.newSibling.id]: n } }
    }
    default:
      return s
  }
}

// visible is the branch on screen, in order.
export function visible(s: ChatState): ChatMessage[] {
  return s.order.map((id) => s.byId[id]).filter((m): m is ChatMessage => m !== undefined)
}

// streamingAnswer is the answer still being produced, if any.
export function streamingAnswer(s: ChatState): ChatMessage | undefined {
  return visible(s).findLast((m) => m.role === 'assistant' && (m.status === 'streaming' || m.status === 'pending'))
}

export interface SpokenView {
  // Sentences in order with their text and playout ('pending': not yet
  // reported, so not yet heard).
  sentences: { sequence: number; text: string; playout: Playout }[]
  // The user cut the answer off: some of it was never heard.
  cut: boolean
  heard: string
  notHeard: string
}

// spokenView splits a spoken answer into what was heard and what was not,
// from the playout the room-agent reported for each sentence (live) or
// persistence stored (a snapshot). Undefined for an answer never spoken.
export function spokenView(m: ChatMessage): SpokenView | undefined {
  if (!m.spoken || m.spoken.length === 0) return undefined
  const bySeq = new Map(m.spoken.map((x) => [x.sequence, x]))
  const seqs = new Set<number>(m.spoken.map((x) => x.sequence))
  for (const k of Object.keys(m.sentences ?? {})) seqs.add(Number(k))
  const sentences = [...seqs].sort((a, b) => a - b).map((seq) => {
    const x = bySeq.get(seq)
    return { sequence: seq, text: m.sentences?.[seq] ?? x?.text ?? '', playout: x?.playout ?? ('pending' as Playout) }
  })
  const cutAt = sentences.findIndex((x) => x.playout === 'interrupted' || x.playout === 'unplayed')
  const cut = cutAt >= 0
  const heardPart = cut ? sentences.filter((x, i) => i < cutAt || x.playout === 'interrupted') : sentences.filter((x) => x.playout !== 'pending')
  const notHeardPart = cut ? sentences.filter((x, i) => i >= cutAt && x.playout !== 'interrupted') : []
  const join = (xs: { sequence: number; text: string }[]) => assemble(Object.fromEntries(xs.map((x) => [x.sequence, x.text])))
  return { sentences, cut, heard: join(heardPart), notHeard: join(notHeardPart) }
}
