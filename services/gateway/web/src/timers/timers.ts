// Timers and reminders (set by the assistant's tools): the person's list,
// cancellation, and the notice when one fires - a toast in the page and a
// system notification when the person allowed them. A fired timer is seen
// either as an envelope of the open conversation with meta alicia.timer_id
// (at once) or by reading the list again (every POLL_MS, for the other
// conversations); each is announced once.
import { create } from 'zustand'
import type { Timer, TimerList } from '../rest.gen'
import type { Envelope } from '../protocol'
import { MessageType } from '../protocol'
import type { AssistantSentence } from '../protocol'

export type { Timer }

export const META_TIMER_ID = 'alicia.timer_id'
export const POLL_MS = 10_000

async function call<T>(method: string, path: string): Promise<T> {
  const res = await fetch(path, { method, credentials: 'same-origin', headers: { Accept: 'application/json' } })
  const text = await res.text()
  const data = text ? (JSON.parse(text) as unknown) : undefined
  if (!res.ok) throw new Error((data as { error?: { message?: string } } | undefined)?.error?.message ?? `${res.status} ${res.statusText}`)
  return data as T
}

export const listTimers = () => call<TimerList>('GET', '/v1/timers').then((l) => l.timers)
export const cancelTimer = (id: string) => call<Timer>('DELETE', `/v1/timers/${encodeURIComponent(id)}`)

export interface Toast {
  id: string
  text: string
  conversationId?: string
}

interface TimerState {
  timers: Timer[] | undefined
  error: string | undefined
  toasts: Toast[]
  // Timers already announced (or fired before the page loaded).
  announced: Set<string>
  loadedAt: number
  refresh(): Promise<void>
  cancel(id: string): Promise<void>
  fired(id: string, text: string, conversationId?: string): void
  dismiss(id: string): void
}

export const useTimers = create<TimerState>((set, get) => ({
  timers: undefined,
  error: undefined,
  toasts: [],
  announced: new Set(),
  loadedAt: Date.now(),
  async refresh() {
    try {
      const timers = await listTimers()
      const first = get().timers === undefined
      set({ timers, error: undefined })
      for (const t of timers) {
        if (t.status !== 'fired') continue
        // Those that fired before this page opened are not news.
        if (first && (t.endedAt ?? 0) < get().loadedAt) get().announced.add(t.id)
        else get().fired(t.id, firedText(t), t.conversationId)
      }
    } catch (e) {
      set({ error: e instanceof Error ? e.message : String(e) })
    }
  },
  async cancel(id) {
    const t = await cancelTimer(id)
    set({ timers: (get().timers ?? []).map((x) => (x.id === id ? t : x)) })
  },
  fired(id, text, conversationId) {
    const { announced } = get()
    if (announced.has(id)) return
    announced.add(id)
    set({ toasts: [...get().toasts, { id, text, conversationId }] })
    notify(text)
    void get().refresh()
  },
  dismiss(id) {
    set({ toasts: get().toasts.filter((t) => t.id !== id) })
  },
}))

// firedText is what a fired timer's message said, rebuilt from the list.
export function firedText(t: Timer): string {
  if (t.kind === 'reminder') return t.label ? `Reminder: ${t.label}.` : 'This is your reminder.'
  return t.label ? `Your timer for ${t.label} is done.` : 'Your timer is done.'
}

// timerEnvelope announces a fired timer from the open conversation's
// envelopes: its message's sentence carries meta alicia.timer_id.
export function timerEnvelope(env: Envelope): void {
  const id = env.meta?.[META_TIMER_ID]
  if (typeof id !== 'string' || env.type !== MessageType.AssistantSentence) return
  useTimers.getState().fired(id, (env.body as AssistantSentence).text, env.conversationId)
}

// notify shows a system notification when the person allowed them.
function notify(text: string): void {
  if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return
  try {
    new Notification('Alicia', { body: text, tag: 'alicia-timer' })
  } catch {
    // Some browsers allow notifications only from a service worker: the toast stays.
  }
}

export function formatDue(t: Timer): string {
  return new Date(t.dueAt).toLocaleString(undefined, { timeZone: t.timeZone, weekday: 'short', hour: '2-digit', minute: '2-digit', day: 'numeric', month: 'short' })
}
