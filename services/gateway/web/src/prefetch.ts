// What a page load needs first is asked for as soon as the script runs, in
// parallel: the session and, on a conversation's URL, the conversation.
// Left to the components, they came one after the other, each after a
// render and its effects (the conversation only once the session was
// known), which cost a cold load of a conversation a round trip and a
// render.
import { api } from './api'
import { parse } from './router'
import type { ConversationWithMessages, Session } from './types'

let session: Promise<Session> | undefined
let conversation: { id: string; at: number; snap: Promise<ConversationWithMessages> } | undefined

// A prefetched conversation older than this is fetched again (the page sat
// on the sign-in screen, say).
const fresh = 10_000

export function prefetch(): void {
  session = api.session()
  session.catch(() => {}) // the store reads the failure
  const route = parse(location.pathname, location.search)
  if (route.name === 'conversation') {
    const snap = api.getConversation(route.id)
    snap.catch(() => {})
    conversation = { id: route.id, at: performance.now(), snap }
  }
}

// takeSession is the session request made at start, once.
export function takeSession(): Promise<Session> | undefined {
  const s = session
  session = undefined
  return s
}

// takeConversation is the request for conversation id made at start, once,
// while it is fresh.
export function takeConversation(id: string): Promise<ConversationWithMessages> | undefined {
  const c = conversation
  conversation = undefined
  if (!c || c.id !== id || performance.now() - c.at > fresh) return undefined
  return c.snap
}
