// The person's timers and reminders in the sidebar (cancel one), and the
// notices of those that fire while the page is open (timers.ts).
import { useEffect, useState } from 'react'
import { href, navigate } from '../router'
import { formatDue, POLL_MS, useTimers } from './timers'
import type { Timer } from './timers'

export function TimersPanel() {
  const timers = useTimers((s) => s.timers)
  const error = useTimers((s) => s.error)
  const [busy, setBusy] = useState<string>()
  const [failed, setFailed] = useState<string>()
  const scheduled = (timers ?? []).filter((t) => t.status === 'scheduled')
  const ended = (timers ?? []).filter((t) => t.status !== 'scheduled').slice(0, 3)
  const cancel = async (t: Timer) => {
    setBusy(t.id)
    setFailed(undefined)
    try {
      await useTimers.getState().cancel(t.id)
    } catch (e) {
      setFailed(e instanceof Error ? e.message : String(e))
    } finally {
      setBusy(undefined)
    }
  }
  return (
    <section aria-labelledby="timers-heading" className="px-3 py-1.5">
      <h2 id="timers-heading" className="text-xs font-semibold tracking-wide text-slate-600 uppercase dark:text-slate-400">
        Timers
      </h2>
      {timers !== undefined && scheduled.length === 0 && ended.length === 0 && (
        <p className="py-1 text-slate-600 dark:text-slate-400">None set. Ask Alicia: “set a timer for ten minutes”.</p>
      )}
      <ul aria-label="Timers and reminders" className="space-y-1 py-1">
        {scheduled.map((t) => (
          <li key={t.id} className="flex items-center justify-between gap-2">
            <span className="min-w-0">
              <span className="block truncate">{t.label || (t.kind === 'timer' ? 'Timer' : 'Reminder')}</span>
              <span className="block text-xs text-slate-600 dark:text-slate-400">{formatDue(t)}</span>
            </span>
            <button
              type="button"
              disabled={busy === t.id}
              onClick={() => void cancel(t)}
              aria-label={`Cancel ${t.kind} ${t.label || formatDue(t)}`}
              className="focus-ring shrink-0 rounded px-2 py-0.5 text-xs text-red-700 hover:bg-red-50 disabled:opacity-50 dark:text-red-400 dark:hover:bg-red-950"
            >
              Cancel
            </button>
          </li>
        ))}
        {ended.map((t) => (
          <li key={t.id} className="truncate text-xs text-slate-600 dark:text-slate-400">
            {t.label || (t.kind === 'timer' ? 'Timer' : 'Reminder')}: {t.status === 'fired' ? (t.deliveredAs === 'spoken' ? 'spoken' : 'done') : 'cancelled'}
          </li>
        ))}
      </ul>
      {(failed || error) && (
        <p role="alert" className="text-xs text-red-700 dark:text-red-400">
          {failed ?? error}
        </p>
      )}
    </section>
  )
}

// TimerToasts reads the list now and every POLL_MS, and shows a toast for
// each timer that fires; it offers to turn system notifications on.
export function TimerToasts() {
  const toasts = useTimers((s) => s.toasts)
  const [permission, setPermission] = useState(() => (typeof Notification === 'undefined' ? 'denied' : Notification.permission))
  useEffect(() => {
    void useTimers.getState().refresh()
    const every = setInterval(() => void useTimers.getState().refresh(), POLL_MS)
    return () => clearInterval(every)
  }, [])
  const hasScheduled = useTimers((s) => (s.timers ?? []).some((t) => t.status === 'scheduled'))
  return (
    <div aria-live="polite" className="pointer-events-none fixed top-12 right-3 z-40 flex w-80 max-w-[calc(100%-1.5rem)] flex-col gap-2">
      {hasScheduled && permission === 'default' && (
        <div className="pointer-events-auto rounded-lg border border-slate-200 bg-white p-3 text-sm shadow-lg dark:border-slate-700 dark:bg-slate-900">
          <p>Be notified when a timer goes off, even in another tab?</p>
          <button
            type="button"
            onClick={() => void Notification.requestPermission().then(setPermission)}
            className="focus-ring mt-2 rounded bg-indigo-600 px-3 py-1 text-white"
          >
            Allow notifications
          </button>
        </div>
      )}
      {toasts.map((t) => (
        <div key={t.id} role="status" className="pointer-events-auto rounded-lg border border-indigo-300 bg-indigo-50 p-3 text-sm shadow-lg dark:border-indigo-700 dark:bg-indigo-950">
          <p className="font-medium">{t.text}</p>
          <div className="mt-2 flex gap-3">
            {t.conversationId && (
              <a
                href={href({ name: 'conversation', id: t.conversationId })}
                onClick={(e) => {
                  e.preventDefault()
                  navigate({ name: 'conversation', id: t.conversationId! })
                  useTimers.getState().dismiss(t.id)
                }}
                className="focus-ring rounded text-indigo-700 underline dark:text-indigo-300"
              >
                Open
              </a>
            )}
            <button type="button" onClick={() => useTimers.getState().dismiss(t.id)} className="focus-ring rounded text-slate-700 underline dark:text-slate-300">
              Dismiss
            </button>
          </div>
        </div>
      ))}
    </div>
  )
}
