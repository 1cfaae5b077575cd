// The sidebar's list of conversations: a page at a time, filtered by title,
// active or archived, and the renames, archives and deletes made from it. A
// slice of the app's store (src/store/app.ts): a rename or a delete changes
// the open conversation too.
import type { StateCreator } from 'zustand'
import { api } from '../api'
import { navigate } from '../router'
import type { Conversation } from '../types'
import type { AppState } from '../store/app'
import { messageOf } from '../ui/errors'

export type ListStatus = 'active' | 'archived'

export interface ConversationsSlice {
  conversations: Conversation[]
  nextCursor?: string
  listStatus: ListStatus
  filter: string
  listLoading: boolean
  listError?: string
  // The list request in flight: a newer one (another filter) aborts it.
  listAbort: AbortController | null

  loadConversations(reset?: boolean): Promise<void>
  setFilter(q: string): void
  setListStatus(s: ListStatus): void
  renameConversation(id: string, title: string): Promise<void>
  archiveConversation(id: string, archived: boolean): Promise<void>
  deleteConversation(id: string): Promise<void>
  // touchConversation moves a conversation to the top, as the server orders
  // the list after a message (the server's order: newest update first).
  touchConversation(id: string, at: number): void
  addConversation(c: Conversation): void
  updateConversation(id: string, patch: Partial<Pick<Conversation, 'title' | 'status'>>): void
  dropConversation(id: string): void
}

// upsert puts c in the list in the server's order: newest update first,
// then by id.
export function upsert(list: Conversation[], c: Conversation): Conversation[] {
  const rest = list.filter((x) => x.id !== c.id)
  return [c, ...rest].sort((a, b) => b.updatedAt - a.updatedAt || (a.id < b.id ? 1 : -1))
}

export const conversationsSlice: StateCreator<AppState, [], [], ConversationsSlice> = (set, get) => ({
  conversations: [],
  listStatus: 'active',
  filter: '',
  listLoading: false,
  listAbort: null,

  async loadConversations(reset = true) {
    get().listAbort?.abort()
    const ab = new AbortController()
    const { filter, listStatus, nextCursor } = get()
    if (!reset && !nextCursor) return
    set({ listAbort: ab, listLoading: true, listError: undefined })
    try {
      const page = await api.listConversations({ status: listStatus, q: filter || undefined, cursor: reset ? undefined : nextCursor }, ab.signal)
      if (ab.signal.aborted) return
      set((s) => ({
        conversations: reset ? page.conversations : [...s.conversations, ...page.conversations.filter((c) => !s.conversations.some((x) => x.id === c.id))],
        nextCursor: page.nextCursor,
        listLoading: false,
        listAbort: null,
      }))
    } catch (e) {
      if (ab.signal.aborted) return
      set({ listLoading: false, listError: messageOf(e), listAbort: null })
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
    get().dropConversation(id)
    if (get().chat?.conversationId === id) {
      get().closeConversation()
      navigate('/', true)
    }
  },
  touchConversation(id, at) {
    set((s) => {
      const c = s.conversations.find((x) => x.id === id)
      return c ? { conversations: upsert(s.conversations, { ...c, updatedAt: at }) } : {}
    })
  },
  addConversation(c) {
    set((s) => ({ conversations: s.listStatus === 'active' ? upsert(s.conversations, c) : s.conversations }))
  },
  updateConversation(id, patch) {
    set((s) => ({
      conversations: s.conversations.map((x) => (x.id === id ? { ...x, title: patch.title || x.title, status: patch.status ?? x.status } : x)),
    }))
  },
  dropConversation(id) {
    set((s) => ({ conversations: s.conversations.filter((x) => x.id !== id) }))
  },
})
