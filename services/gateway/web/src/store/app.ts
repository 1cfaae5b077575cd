// The page's state: the session, the sidebar's conversations, and the open
// conversation with its live connection.
import { create } from 'zustand'
import { api, ApiError } from '../api'
import { Connection, type ConnectionStatus } from '../chat/connection'
import { addLocalUserMessage, apply, emptyChat, fromSnapshot, mergeSnapshot, streamingAnswer, type ChatState } from '../chat/model'
import { newId } from '../ids'
import { takeConversation, takeSession } from '../prefetch'
import { MessageType, type Envelope, type ServerInfo, type StartAnswer } from '../protocol'
import { navigate } from '../router'
import type { Conversation, Session } from '../types'

export type ChatLoad = 'idle' | 'loading' | 'ready' | 'forbidden' | 'missing' | 'error'

interface AppState {
  session: Session | null | undefined // undefined: not known yet
  sessionError?: string

  conversations: Conversation[]
  nextCursor?: string
  listStatus: 'active' | 'archived'
  filter: string
  listLoading: boolean
  listError?: string

  chat: ChatState | null
  chatLoad: ChatLoad
  chatError?: string
  connection: ConnectionStatus
  serverInfo?: ServerInfo
  online: boolean

  loadSession(): Promise<void>
  signIn(key: string): Promise<void>
  signOut(): Promise<void>
  expired(): void

  loadConversations(reset?: boolean): Promise<void>
  setFilter(q: string): void
  setListStatus(s: 'active' | 'archived'): void
  renameConversation(id: string, title: string): Promise<void>
  archiveConversation(id: string, archived: boolean): Promise<void>
  deleteConversation(id: string): Promise<void>

  openConversation(id: string): Promise<void>
  closeConversation(): void
  startNew(): void
  // newConversation makes a conversation and opens it; it returns its id.
  newConversation(title: string): Promise<string>
  send(text: string): Promise<void>
  stop(): void
  regenerate(messageId: string): void
  continueAnswer(messageId: string): void
  edit(messageId: string, content: string): void
  showBranch(throughMessageId: string): Promise<void>
  reconnect(): void
  dismissError(id: string): void
  // receive applies an envelope that came another way than the WebSocket
  // (the voice room's data channel) to the open conversation.
  receive(env: Envelope): void
}

let conn: Connection | null = null
let listAbort: AbortController | null = null
let chatAbort: AbortController | null = null

function upsert(list: Conversation[], c: Conversation): Conversation[] {
  const rest = list.filter((x) => x.id !== c.id)
  return [c, ...rest].sort((a, b) => b.updatedAt - a.updatedAt || (a.id < b.id ? 1 : -1))
}

export const useApp = create<AppState>()((set, get) => ({
  session: undefined,
  conversations: [],
  listStatus: 'active',
  filter: '',
  listLoading: false,
  chat: null,
  chatLoad: 'idle',
  connection: 'closed',
  online: typeof navigator === 'undefined' ? true : navigator.onLine,

  async loadSession() {
    try {
      set({ session: await (takeSession() ?? api.session()), sessionError: undefined })
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) set({ session: null, sessionError: undefined })
      else set({ session: null, sessionError: e instanceof Error ? e.message : String(e) })
    }
  },
  async signIn(key) {
    const session = await api.signIn(key.trim())
    set({ session, sessionError: undefined })
  },
  async signOut() {
    get().closeConversation()
    try {
      await api.signOut()
    } finally {
      set({ session: null, conversations: [], nextCursor: undefined, chat: null, chatLoad: 'idle' })
      navigate('/signin', true)
    }
  },
  expired() {
    if (get().session) {
      get().closeConversation()
      set({ session: null, sessionError: 'Your session has ended. Sign in again.' })
    }
  },

  async loadConversations(reset = true) {
    listAbort?.abort()
    const ab = new AbortController()
    listAbort = ab
    const { filter, listStatus, nextCursor } = get()
    if (!reset && !nextCursor) return
    set({ listLoading: true, listError: undefined })
    try {
      const page = await api.listConversations({ status: listStatus, q: filter || undefined, cursor: reset ? undefined : nextCursor }, ab.signal)
      if (ab.signal.aborted) return
      set((s) => ({
        conversations: reset ? page.conversations : [...s.conversations, ...page.conversations.filter((c) => !s.conversations.some((x) => x.id === c.id))],
        nextCursor: page.nextCursor,
        listLoading: false,
      }))
    } catch (e) {
      if (ab.signal.aborted) return
      set({ listLoading: false, listError: e instanceof Error ? e.message : String(e) })
    }
  },
  setFilter(q) {
    set({ filter: q })
    void get().loadConversations(true)
  },
  setListStatus(st) {
    set({ listStatus: st })
    void get().loadConversations(true)
  },
  async renameConversation(id, title) {
    const c = await api.patchConversation(id, { title })
    set((s) => ({
      conversations: s.conversations.map((x) => (x.id === id ? c : x)),
      chat: s.chat?.conversationId === id ? { ...s.chat, title: c.title } : s.chat,
    }))
  },
  async archiveConversation(id, archived) {
    const c = await api.patchConversation(id, { status: archived ? 'archived' : 'active' })
    set((s) => ({
      conversations: s.conversations.filter((x) => x.id !== id),
      chat: s.chat?.conversationId === id ? { ...s.chat, status: c.status } : s.chat,
    }))
  },
  async deleteConversation(id) {
    await api.deleteConversation(id)
    set((s) => ({ conversations: s.conversations.filter((x) => x.id !== id) }))
    if (get().chat?.conversationId === id) {
      get().closeConversation()
      navigate('/', true)
    }
  },

  async openConversation(id) {
    if (get().chat?.conversationId === id && get().chatLoad === 'ready') return
    get().closeConversation()
    const ab = new AbortController()
    chatAbort = ab
    set({ chat: emptyChat(id), chatLoad: 'loading', chatError: undefined })
    let snap
    try {
      // A failed prefetch is asked again, so its error is handled as any.
      const early = takeConversation(id)
      snap = await (early ? early.catch(() => api.getConversation(id, ab.signal)) : api.getConversation(id, ab.signal))
    } catch (e) {
      if (ab.signal.aborted) return
      if (e instanceof ApiError && e.status === 403) set({ chatLoad: 'forbidden', chat: null })
      else if (e instanceof ApiError && (e.status === 404 || e.status === 400)) set({ chatLoad: 'missing', chat: null })
      else set({ chatLoad: 'error', chatError: e instanceof Error ? e.message : String(e) })
      return
    }
    if (ab.signal.aborted) return
    set({ chat: fromSnapshot(snap), chatLoad: 'ready' })
    connect(id, snap.lastClientStanzaId)
  },
  closeConversation() {
    chatAbort?.abort()
    chatAbort = null
    // What was sent and has not gone out yet (a first message right before
    // moving on) still goes; the page no longer hears this connection.
    conn?.closeWhenSent()
    conn = null
    set({ chat: null, chatLoad: 'idle', connection: 'closed' })
  },
  startNew() {
    get().closeConversation()
    navigate('/')
  },
  async newConversation(title) {
    const c = await api.createConversation(title)
    set((s) => ({ conversations: s.listStatus === 'active' ? upsert(s.conversations, c) : s.conversations }))
    navigate({ name: 'conversation', id: c.id })
    set({ chat: fromSnapshot({ ...c, messages: [] }), chatLoad: 'ready' })
    connect(c.id, c.lastClientStanzaId)
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
    set((s) => ({
      chat: addLocalUserMessage(chat, id, content, Date.now()),
      // The conversation moves to the top of the sidebar, as the server orders it.
      conversations: s.conversations.some((x) => x.id === cid)
        ? upsert(s.conversations, { ...s.conversations.find((x) => x.id === cid)!, updatedAt: Date.now() })
        : s.conversations,
    }))
    conn?.send(MessageType.UserMessage, { id, previousId, conversationId: cid, content, timestamp: Date.now() })
  },
  stop() {
    const chat = get().chat
    if (!chat) return
    const target = streamingAnswer(chat)
    const body = { conversationId: chat.conversationId, targetId: target?.id, reason: 'user pressed stop', stopType: 'all' }
    conn?.send(MessageType.ControlStop, body)
    // The llm confirms only stops that named no answer: show this one stopped now.
    if (target) set({ chat: apply(chat, { type: MessageType.ControlStop, body }) })
  },
  regenerate(messageId) {
    const chat = get().chat
    if (!chat) return
    conn?.send(MessageType.ControlVariation, { conversationId: chat.conversationId, targetId: messageId, mode: 'regenerate' })
  },
  continueAnswer(messageId) {
    const chat = get().chat
    if (!chat) return
    conn?.send(MessageType.ControlVariation, { conversationId: chat.conversationId, targetId: messageId, mode: 'continue' })
  },
  edit(messageId, content) {
    const chat = get().chat
    if (!chat || !content.trim()) return
    conn?.send(MessageType.ControlVariation, { conversationId: chat.conversationId, targetId: messageId, mode: 'edit', newContent: content.trim() })
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
    conn?.reconnectNow()
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
}))

function connect(id: string, stanzaBase: number) {
  conn?.closeWhenSent()
  const c = new Connection(
    { conversationId: id, stanzaBase, lastSeq: () => useApp.getState().chat?.lastSeq ?? 0 },
    {
      status: (st) => {
        if (conn !== c) return
        useApp.setState({ connection: st })
        if (st === 'reconnecting') checkSession()
      },
      envelope: (env) => {
        if (conn !== c) return
        const chat = useApp.getState().chat
        if (!chat || chat.conversationId !== id) return
        const next = apply(chat, env)
        if (next !== chat) useApp.setState({ chat: next })
        // An answer to a message this page has not seen (sent from another
        // tab or device: client envelopes are not forwarded): read the
        // conversation again to show it.
        if (env.type === MessageType.StartAnswer) {
          const asked = (env.body as StartAnswer).previousId
          if (asked && !chat.byId[asked]) refresh(id)
        }
        if (env.type === MessageType.ConversationUpdate) {
          useApp.setState((s) => ({
            conversations: s.conversations.map((x) => (x.id === id ? { ...x, title: next.title || x.title, status: next.status as Conversation['status'] } : x)),
          }))
          if (next.status === 'deleted') {
            useApp.getState().closeConversation()
            navigate('/', true)
          }
        }
      },
      serverInfo: (info) => useApp.setState({ serverInfo: info }),
      revoked: (code) => {
        if (conn !== c) return
        // Signed out (here or elsewhere) or its key removed: the sign-in.
        if (code === 4401) useApp.getState().expired()
        else if (code === 4404) {
          useApp.setState((s) => ({ conversations: s.conversations.filter((x) => x.id !== id) }))
          useApp.getState().closeConversation()
          navigate('/', true)
        }
      },
    },
  )
  conn = c
  c.start()
}

let lastSessionCheck = 0
// checkSession: a WebSocket that cannot reconnect may have lost its session
// (expired, signed out elsewhere, its key removed): the upgrade's 401 is
// not visible to the page, so ask, at most every 5 s, and show the sign-in.
function checkSession() {
  const now = Date.now()
  if (now - lastSessionCheck < 5000) return
  lastSessionCheck = now
  api.session().catch((e) => {
    if (e instanceof ApiError && e.status === 401) useApp.getState().expired()
  })
}

let refreshing: ReturnType<typeof setTimeout> | undefined
// refresh merges a fresh snapshot of the open conversation, at most once
// per 300 ms.
function refresh(id: string) {
  if (refreshing) return
  refreshing = setTimeout(async () => {
    refreshing = undefined
    try {
      const snap = await api.getConversation(id)
      const cur = useApp.getState().chat
      if (cur && cur.conversationId === id) useApp.setState({ chat: mergeSnapshot(cur, snap) })
    } catch {
      /* the next answer tries again */
    }
  }, 300)
}

export function connectionForTests(): Connection | null {
  return conn
}

if (typeof window !== 'undefined') {
  window.addEventListener('online', () => {
    useApp.setState({ online: true })
    conn?.reconnectNow()
  })
  window.addEventListener('offline', () => useApp.setState({ online: false }))
}
