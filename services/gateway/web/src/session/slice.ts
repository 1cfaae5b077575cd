// The session: who is signed in (the HttpOnly cookie's user), signing in and
// out, and noticing that the session has ended. A slice of the app's store
// (src/store/app.ts), so that signing out can close the open conversation
// and clear the sidebar in one change.
import type { StateCreator } from 'zustand'
import { api, ApiError } from '../api'
import { takeSession } from '../prefetch'
import { navigate } from '../router'
import type { Session } from '../types'
import type { AppState } from '../store/app'
import { messageOf } from '../ui/errors'

// A WebSocket that cannot reconnect asks whether the session is still there
// at most this often.
export const SESSION_CHECK_EVERY_MS = 5000

// signInError: why a key was refused, in the person's words.
export function signInError(e: unknown): string {
  if (e instanceof ApiError && e.status === 401) return 'That API key is not valid.'
  if (e instanceof ApiError && e.status === 429) return 'Too many attempts. Wait a minute and try again.'
  return messageOf(e)
}

export interface SessionSlice {
  session: Session | null | undefined // undefined: not known yet
  sessionError?: string
  // The browser's network (navigator.onLine and its online/offline events).
  online: boolean
  // When checkSession last asked (Date.now()).
  sessionCheckedAt: number

  loadSession(): Promise<void>
  signIn(key: string): Promise<void>
  signOut(): Promise<void>
  expired(): void
  // checkSession: a WebSocket that cannot reconnect may have lost its
  // session (expired, signed out elsewhere, its key removed): the upgrade's
  // 401 is not visible to the page, so ask, at most every 5 s, and show the
  // sign-in.
  checkSession(): void
  setOnline(online: boolean): void
}

export const sessionSlice: StateCreator<AppState, [], [], SessionSlice> = (set, get) => ({
  session: undefined,
  online: typeof navigator === 'undefined' ? true : navigator.onLine,
  sessionCheckedAt: 0,

  async loadSession() {
    try {
      set({ session: await (takeSession() ?? api.session()), sessionError: undefined })
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) set({ session: null, sessionError: undefined })
      else set({ session: null, sessionError: messageOf(e) })
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
  checkSession() {
    const now = Date.now()
    if (now - get().sessionCheckedAt < SESSION_CHECK_EVERY_MS) return
    set({ sessionCheckedAt: now })
    api.session().catch((e) => {
      if (e instanceof ApiError && e.status === 401) get().expired()
    })
  },
  setOnline(online) {
    set({ online })
    if (online) get().reconnect()
  },
})
