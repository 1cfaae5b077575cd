// What React shows of the open conversation, a step behind the store.
//
// The store's chat is always the newest state (the actions and the
// connection read it); React renders a copy of it, `shown`, that LiveChat
// moves forward when the main thread can afford a render. Rows the store has
// and React not yet (the message just sent, its answer's first sentence)
// are drawn by ChatTail straight into the DOM in the same task as the key
// press or the WebSocket frame, so neither waits for React and the
// virtualiser: the key's task sends and appends a row, the frame's task
// decodes, folds and writes a text node. React catches up after the answer's
// first sentence is painted (an idle callback), and its commit takes the
// tail's rows away (MessageList's layout effect: no row is ever twice in
// the document). See the web client's README, "Rendering path".
import type { ChatMessage, ChatState } from './model'
import type { ChatTail } from './tail'

export interface ChatSource {
  get(): ChatState | null
  // onChange is called after every change of the store's chat.
  subscribe(onChange: () => void): () => void
}

// A message the page sent waits this long at most for its answer's first
// sentence before React shows it (and the Stop button) anyway: a model that
// thinks for a while gets the full view, a fast one never waits for React.
export const HOLD_MAX_MS = 250
// React catches up in an idle callback after the tail's rows are painted,
// at most this long after.
export const IDLE_TIMEOUT_MS = 100

// How a new state reaches the screen:
// now: React renders it at once (no tail in the page, or a change that is
// not rows added at the end: another branch, another conversation);
// frame: only rows React shows changed: React renders them before the next
// paint (one render for all the frames of that time);
// hold: the newest row is the page's message, or its answer with nothing to
// show yet: the tail shows them, React waits for the first sentence (at most
// HOLD_MAX_MS);
// idle: the tail shows the new rows, React catches up once they are painted.
export type Plan = 'none' | 'now' | 'frame' | 'hold' | 'idle'

// extendsOrder: b is a with messages added at its end.
export function extendsOrder(a: string[], b: string[]): boolean {
  if (b.length < a.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

// tailRows are the messages of latest that shown does not have yet, when
// latest only adds messages at the end of shown's branch.
export function tailRows(shown: ChatState | null, latest: ChatState | null): ChatMessage[] {
  if (!shown || !latest || shown === latest || shown.conversationId !== latest.conversationId) return []
  if (!extendsOrder(shown.order, latest.order)) return []
  const out: ChatMessage[] = []
  for (const id of latest.order.slice(shown.order.length)) {
    const m = latest.byId[id]
    if (m) out.push(m)
  }
  return out
}

// waiting: the message has nothing but "a turn is under way" to show, which
// the tail draws as well as React: the page's own message, or an answer
// started that has no sentence, part (reasoning, tool, memory), playout or
// error yet.
export function waiting(m: ChatMessage): boolean {
  if (m.error) return false
  if (m.role === 'user') return true
  return (
    (m.status === 'streaming' || m.status === 'pending') && !m.content && !m.reasoning?.length && !m.toolUses?.length &&
    !m.memoriesUsed?.length && !m.spoken?.length
  )
}

// The tail draws the few rows a turn adds; more at once (a conversation
// loaded, a re-read that found messages from elsewhere) is React's, now.
export const TAIL_MAX_ROWS = 4

export function plan(shown: ChatState | null, latest: ChatState | null, tailMounted: boolean): Plan {
  if (shown === latest) return 'none'
  if (!tailMounted || !shown || !latest || shown.conversationId !== latest.conversationId) return 'now'
  // An empty list is a conversation being loaded (the first message of a
  // new one shows no list, so no tail).
  if (shown.order.length === 0 || !extendsOrder(shown.order, latest.order)) return 'now'
  const rows = tailRows(shown, latest)
  if (rows.length === 0) return 'frame'
  if (rows.length > TAIL_MAX_ROWS) return 'now'
  return waiting(rows[rows.length - 1]!) ? 'hold' : 'idle'
}

type Timer = { kind: Exclude<Plan, 'none' | 'now'>; cancel: () => void }

function later(kind: Timer['kind'], run: () => void, holdLeft: number): Timer {
  switch (kind) {
    case 'frame': {
      // Before the next paint; a hidden page gets no frames, so a timer too.
      const f = requestAnimationFrame(run)
      const t = setTimeout(run, 100)
      return { kind, cancel: () => (cancelAnimationFrame(f), clearTimeout(t)) }
    }
    case 'idle':
      if (typeof requestIdleCallback === 'function') {
        const i = requestIdleCallback(run, { timeout: IDLE_TIMEOUT_MS })
        return { kind, cancel: () => cancelIdleCallback(i) }
      } else {
        const t = setTimeout(run, 16)
        return { kind, cancel: () => clearTimeout(t) }
      }
    case 'hold': {
      const t = setTimeout(run, Math.max(0, holdLeft))
      return { kind, cancel: () => clearTimeout(t) }
    }
  }
}

// LiveChat is the view's handle on the chat: an external store for
// useSyncExternalStore (subscribe, getShown) that lags the source as plan
// says, and the tail it draws into while the list is mounted. One per
// conversation view; nothing module-level.
export class LiveChat {
  private shown: ChatState | null
  private listeners = new Set<() => void>()
  private unsubscribe?: () => void
  private tail: ChatTail | null = null
  private timer: Timer | null = null
  // When the current hold began (performance.now()), if one runs.
  private holdSince: number | undefined

  constructor(private readonly source: ChatSource) {
    this.shown = source.get()
  }

  subscribe = (fn: () => void): (() => void) => {
    this.listeners.add(fn)
    if (!this.unsubscribe) {
      this.unsubscribe = this.source.subscribe(() => this.changed())
      this.changed()
    }
    return () => {
      this.listeners.delete(fn)
      if (this.listeners.size === 0 && this.unsubscribe) {
        this.unsubscribe()
        this.unsubscribe = undefined
        this.cancel()
      }
    }
  }

  getShown = (): ChatState | null => this.shown

  // mountTail: the list is on screen and draws new rows through tail.
  mountTail(tail: ChatTail): void {
    this.tail = tail
  }

  unmountTail(tail: ChatTail): void {
    if (this.tail !== tail) return
    this.tail = null
    tail.dispose()
    // Nothing is left to draw what React has not: it renders it now.
    if (this.shown !== this.source.get()) this.publish()
  }

  // syncTail runs after each commit of the list: the tail keeps only what
  // React does not show yet.
  syncTail(): void {
    this.tail?.render(tailRows(this.shown, this.source.get()))
  }

  // flush lets React catch up now.
  flush(): void {
    if (this.shown !== this.source.get()) this.publish()
  }

  private changed(): void {
    const latest = this.source.get()
    const p = plan(this.shown, latest, this.tail !== null)
    if (p === 'none') return
    if (p === 'now') {
      this.publish()
      return
    }
    this.tail?.render(tailRows(this.shown, latest))
    if (p === 'hold') this.holdSince ??= performance.now()
    else this.holdSince = undefined
    if (this.timer?.kind === p) return // already on its way
    this.cancel()
    const left = this.holdSince === undefined ? 0 : this.holdSince + HOLD_MAX_MS - performance.now()
    this.timer = later(p, () => this.publish(), left)
  }

  private cancel(): void {
    this.timer?.cancel()
    this.timer = null
  }

  private publish(): void {
    this.cancel()
    this.holdSince = undefined
    const latest = this.source.get()
    if (latest === this.shown) return
    this.shown = latest
    for (const fn of this.listeners) fn()
  }
}

// whenIdle runs fn once the main thread is idle (at most timeoutMs later):
// work a key press causes that nothing waits for.
export function whenIdle(fn: () => void, timeoutMs = 1000): void {
  if (typeof requestIdleCallback === 'function') requestIdleCallback(() => fn(), { timeout: timeoutMs })
  else setTimeout(fn, 50)
}
