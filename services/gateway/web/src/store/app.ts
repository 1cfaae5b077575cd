// The page's store: one zustand store built by createAppStore from the
// features' slices — the session (src/session/slice.ts), the sidebar's
// conversations (src/conversations/slice.ts) — and the open conversation's
// slice below, with its live connection. Every piece of state, the
// connection and the requests in flight included, lives in the store: a
// second store (a test's) shares nothing with the page's.
import { create, type StateCreator } from 'zustand'
import { api, ApiError } from '../api'
import { Connection, type ConnectionStatus } from '../chat/connection'
import { whenIdle } from '../chat/live'
import { delivered, offlineEnvelope, syncOutbox } from '../chat/offline'
import { outbox } from '../chat/outbox'
import { addCommentary, addLocalUserMessage, apply, emptyChat, fromSnapshot, mergeSnapshot, streamingAnswer, type ChatState } from '../chat/model'
import { conversationsSlice, type ConversationsSlice } from '../conversations/slice'
import { newId } from '../ids'
import { takeConversation } from '../prefetch'
import { MessageType, type Envelope, type ServerInfo, type StartAnswer } from '../protocol'
import { navigate } from '../router'
import { sessionSlice, type SessionSlice } from '../session/slice'
import type { Conversation } from '../types'
import { messageOf } from '../ui/errors'
import { timerEnvelope } from '../timers/timers'

export type ChatLoad = 'idle' | 'loading' | 'ready' | 'forbidden' | 'missing' | 'error'

// The open conversation: its state (a pure reducer, src/chat/model.ts),
// how its load went, and its WebSocket.
export interface ChatSlice {
  chat: ChatState | null
  chatLoad: ChatLoad
  chatError?: string
  connection: ConnectionStatus
  serverInfo?: ServerInfo
  // The open conversation's WebSocket; only the store makes and closes it.
  conn: Connection | null
  // The open conversation's REST read in flight.
  chatAbort: AbortController | null
  // A pending re-read of the open conversation (refresh).
  refreshTimer?: ReturnType<typeof setTimeout>

  openConversation(id: string): Promise<void>
  closeConversation(): void
  startNew(): void
  // newConversation makes a conversation and opens it, titled with a
  // placeholder (title) that the generated title replaces; it returns its id.
  newConversation(title: string): Promise<string>
  send(text: string): Promise<void>
  stop(): void
  regenerate(messageId: string): void
  continueAnswer(messageId: string): void
  edit(messageId: string, content: string): void
  // comment sends the person's Commentary on a message, or on the whole
  // conversation when messageId is undefined.
  comment(messageId: string | undefined, content: string): void
  showBranch(throughMessageId: string): Promise<void>
  reconnect(): void
  dismissError(id: string): void
  // receive applies an envelope that came another way than the WebSocket
  // (the voice room's data channel) to the open conversation.
  receive(env: Envelope): void
  // connect opens the conversation's WebSocket, closing the previous one.
  connect(id: string, stanzaBase: number): void
  // refresh merges a fresh snapshot of the open conversation, at most once
  // per 300 ms.
  refresh(id: string): void
}

export type AppState = SessionSlice & ConversationsSlice & ChatSlice

const chatSlice: StateCreator<AppState, [], [], ChatSlice> = (set, get) => ({
  chat: null,
  chatLoad: 'idle',
  connection: 'closed',
  conn: null,
  chatAbort: null,

  async openConversation(id) {
    if (get().chat?.conversationId === id && get().chatLoad === 'ready') return
    get().closeConversation()
    const ab = new AbortController()
    set({ chat: emptyChat(id), chatLoad: 'loading', chatError: undefined, chatAbort: ab })
    let snap
    try {
      // A failed prefetch is asked again, so its error is handled as any.
      const early = takeConversation(id)
      snap = await (early ? early.catch(() => api.getConversation(id, ab.signal)) : api.getConversation(id, ab.signal))
    } catch (e) {
      if (ab.signal.aborted) return
      if (e instanceof ApiError && e.status === 403) set({ chatLoad: 'forbidden', chat: null })
      else if (e instanceof ApiError && (e.status === 404 || e.status === 400)) set({ chatLoad: 'missing', chat: null })
      else set({ chatLoad: 'error', chatError: messageOf(e) })
      return
    }
    if (ab.signal.aborted) return
    set({ chat: fromSnapshot(snap), chatLoad: 'ready', chatAbort: null })
    get().connect(id, snap.lastClientStanzaId)
  },
  closeConversation() {
    get().chatAbort?.abort()
    // What was sent and has not gone out yet (a first message right before
    // moving on) still goes; the page no longer hears this connection.
    get().conn?.closeWhenSent()
    set({ chat: null, chatLoad: 'idle', connection: 'closed', conn: null, chatAbort: null })
  },
  startNew() {
    get().closeConversation()
    navigate('/')
  },
  async newConversation(title) {
    // Its title is a placeholder until the one generated from its content.
    const c = await api.createConversation(title, true)
    get().addConversation(c)
    navigate({ name: 'conversation', id: c.id })
    set({ chat: fromSnapshot({ ...c, messages: [] }), chatLoad: 'ready' })
    get().connect(c.id, c.lastClientStanzaId)
    return c.id
  },
  async send(text) {
    const content = text.trim()
    if (!content) return
    let chat = get().chat
    if (!chat) {
      // The first message of a new conversation: make it, then open it.
      await get().newConversation(content.length > 60 ? content.slice(0, 57).trimEnd() + '…' : content)
      chat = get().chat
      if (!chat) return
    }
    const id = newId('am')
    const previousId = chat.order.at(-1)
    const cid = chat.conversationId
    const at = Date.now()
    if (!get().online) {
      // Offline: kept in the outbox (IndexedDB) and sent in a SyncRequest
      // once the connection is back (src/chat/outbox.ts).
      await outbox.add(cid, content, previousId, at)
      return
    }
    // Out first, then shown (drawn by the chat's tail, not rendered by React
    // in this task: src/chat/live.ts).
    const sent = get().conn?.send(MessageType.UserMessage, { id, previousId, conversationId: cid, content, timestamp: at })
    if (sent?.stanzaId) delivered.expect(sent.stanzaId, id)
    set({ chat: addLocalUserMessage(chat, id, content, at) })
    // The conversation moves to the top of the sidebar, as the server orders
    // it, once the main thread is idle: the sidebar's render is not in the
    // way of the answer either.
    whenIdle(() => get().touchConversation(cid, at))
  },
  stop() {
    const chat = get().chat
    if (!chat) return
    const target = streamingAnswer(chat)
    const body = { conversationId: chat.conversationId, targetId: target?.id, reason: 'user pressed stop', stopType: 'all' }
    get().conn?.send(MessageType.ControlStop, body)
    // The llm confirms only stops that named no answer: show this one stopped now.
    if (target) set({ chat: apply(chat, { type: MessageType.ControlStop, body }) })
  },
  regenerate(messageId) {
    const chat = get().chat
    if (!chat) return
    get().conn?.send(MessageType.ControlVariation, { conversationId: chat.conversationId, targetId: messageId, mode: 'regenerate' })
  },
  continueAnswer(messageId) {
    const chat = get().chat
    if (!chat) return
    get().conn?.send(MessageType.ControlVariation, { conversationId: chat.conversationId, targetId: messageId, mode: 'continue' })
  },
  edit(messageId, content) {
    const chat = get().chat
    if (!chat || !content.trim()) return
    get().conn?.send(MessageType.ControlVariation, { conversationId: chat.conversationId, targetId: messageId, mode: 'edit', newContent: content.trim() })
  },
  comment(messageId, content) {
    const chat = get().chat
    const text = content.trim()
    // A comment on the conversation names its first message: the schema
    // asks for one (PROTOCOL.md 15); commentaryType says it is not about it.
    const anchor = messageId ?? chat?.order[0]
    if (!chat || !text || !anchor) return
    const id = newId('aucc')
    const commentaryType = messageId ? undefined : 'conversation'
    get().conn?.send(MessageType.Commentary, { id, conversationId: chat.conversationId, messageId: anchor, content: text, ...(commentaryType ? { commentaryType } : {}) })
    set({ chat: addCommentary(chat, { id, messageId, content: text, commentaryType, createdAt: Date.now() }) })
  },
  async showBranch(through) {
    const chat = get().chat
    if (!chat) return
    const snap = await api.getBranch(chat.conversationId, through)
    const cur = get().chat
    if (!cur || cur.conversationId !== chat.conversationId) return
    set({ chat: { ...mergeSnapshot(cur, snap), order: snap.messages.map((m) => m.id) } })
  },
  reconnect() {
    get().conn?.reconnectNow()
  },
  dismissError(id) {
    const chat = get().chat
    if (chat) set({ chat: { ...chat, errors: chat.errors.filter((e) => e.id !== id) } })
  },
  receive(env) {
    const chat = get().chat
    if (!chat || env.conversationId !== chat.conversationId) return
    const next = apply(chat, env)
    if (next !== chat) set({ chat: next })
  },
  connect(id, stanzaBase) {
    get().conn?.closeWhenSent()
    const c = new Connection(
      { conversationId: id, stanzaBase, lastSeq: () => get().chat?.lastSeq ?? 0 },
      {
        status: (st) => {
          if (get().conn !== c) return
          set({ connection: st })
          if (st === 'reconnecting') get().checkSession()
          // Messages written offline go out once the connection is back.
          if (st === 'open') void syncOutbox(c, id)
          else outbox.unsent(id)
        },
        envelope: (env) => {
          if (get().conn !== c) return
          const chat = get().chat
          if (!chat || chat.conversationId !== id) return
          if (offlineEnvelope(env)) get().refresh(id) // a SyncResponse: the server's rows
          timerEnvelope(env) // a timer that fired: a toast and a notification
          const next = apply(chat, env)
          if (next !== chat) set({ chat: next })
          // An answer to a message this page has not seen (sent from another
          // tab or device: client envelopes are not forwarded): read the
          // conversation again to show it.
          if (env.type === MessageType.StartAnswer) {
            const asked = (env.body as StartAnswer).previousId
            if (asked && !chat.byId[asked]) get().refresh(id)
          }
          if (env.type === MessageType.ConversationUpdate) {
            get().updateConversation(id, { title: next.title, status: next.status as Conversation['status'] })
            if (next.status === 'deleted') {
              get().closeConversation()
              navigate('/', true)
            }
          }
        },
        serverInfo: (info) => set({ serverInfo: info }),
        revoked: (code) => {
          if (get().conn !== c) return
          // Signed out (here or elsewhere) or its key removed: the sign-in.
          if (code === 4401) get().expired()
          else if (code === 4404) {
            get().dropConversation(id)
            get().closeConversation()
            navigate('/', true)
          }
        },
      },
    )
    set({ conn: c })
    c.start()
  },
  refresh(id) {
    if (get().refreshTimer) return
    set({
      refreshTimer: setTimeout(async () => {
        set({ refreshTimer: undefined })
        try {
          const snap = await api.getConversation(id)
          const cur = get().chat
          if (cur && cur.conversationId === id) set({ chat: mergeSnapshot(cur, snap) })
        } catch {
          /* the next answer tries again */
        }
      }, 300),
    })
  },
})

// createAppStore makes a store with nothing in it yet: the page has one
// (useApp), each test its own.
export function createAppStore() {
  return create<AppState>()((...a) => ({
    ...sessionSlice(...a),
    ...conversationsSlice(...a),
    ...chatSlice(...a),
  }))
}

export type AppStore = ReturnType<typeof createAppStore>

export const useApp = createAppStore()

// followNetwork keeps a store's online flag with the browser's and
// reconnects the open conversation when the network is back; it returns
// the function that stops it. main.tsx calls it for useApp.
export function followNetwork(store: AppStore, target: Pick<Window, 'addEventListener' | 'removeEventListener'> = window): () => void {
  const online = () => store.getState().setOnline(true)
  const offline = () => store.getState().setOnline(false)
  target.addEventListener('online', online)
  target.addEventListener('offline', offline)
  return () => {
    target.removeEventListener('online', online)
    target.removeEventListener('offline', offline)
  }
}
