// Hands-free mode in the voice panel (issue 30, item 3): Alicia answers only
// speech that begins with her name (server-info's wakeWords, "alicia" by
// default); anything else said is neither answered nor stored. The toggle
// sets the conversation's own Configuration.wakeWord through
// PUT /v1/conversations/{id}/preferences (the gateway publishes the
// Configuration on the person's behalf; the room-agent applies it from the
// next utterance); its state comes from the conversation's effective
// preferences (its own over the person's default).
import { useEffect, useState } from 'react'
import { api } from '../api'
import { useApp } from '../store/app'
import { wakeWordName } from './wake'

// The person's default and the conversation's own value, as
// GET /v1/conversations/{id} reports them.
interface WithPreferences {
  preferences?: { wakeWord?: boolean }
}

async function putWakeWord(cid: string, on: boolean): Promise<boolean> {
  const res = await fetch(`/v1/conversations/${encodeURIComponent(cid)}/preferences`, {
    method: 'PUT',
    credentials: 'same-origin',
    headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
    body: JSON.stringify({ wakeWord: on }),
  })
  const data = (await res.json().catch(() => undefined)) as { wakeWord?: boolean; error?: { message?: string } } | undefined
  if (!res.ok) throw new Error(data?.error?.message ?? `${res.status} ${res.statusText}`)
  return data?.wakeWord ?? on
}

// How long the page says that speech was not addressed to Alicia.
const NOT_ADDRESSED_MS = 4000

export function HandsFree({ conversationId, disabled }: { conversationId?: string; disabled?: boolean }) {
  const [on, setOn] = useState<boolean | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const [notAddressed, setNotAddressed] = useState(false)
  const name = wakeWordName(useApp((s) => s.serverInfo?.wakeWords))

  useEffect(() => {
    if (!conversationId) return
    const ctl = new AbortController()
    api
      .getConversation(conversationId, ctl.signal)
      .then((c) => setOn((c as WithPreferences).preferences?.wakeWord ?? false))
      .catch(() => setOn((v) => v ?? false))
    return () => ctl.abort()
  }, [conversationId])

  // The room-agent says on the data channel when speech was heard but not
  // addressed (the voice engine's 'not-addressed' event).
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined
    const heard = (e: Event) => {
      if ((e as CustomEvent<{ kind: string }>).detail?.kind !== 'not-addressed') return
      setNotAddressed(true)
      clearTimeout(timer)
      timer = setTimeout(() => setNotAddressed(false), NOT_ADDRESSED_MS)
    }
    window.addEventListener('alicia:voice', heard)
    return () => {
      window.removeEventListener('alicia:voice', heard)
      clearTimeout(timer)
    }
  }, [])

  async function toggle(next: boolean) {
    if (!conversationId) return
    setBusy(true)
    setError(undefined)
    try {
      setOn(await putWakeWord(conversationId, next))
    } catch (e) {
      setError(`Hands-free could not be ${next ? 'turned on' : 'turned off'}: ${e instanceof Error ? e.message : String(e)}`)
    } finally {
      setBusy(false)
    }
  }

  return (
    <div data-testid="hands-free" data-on={on === true} className="mt-1">
      <label className="flex items-center gap-1" title={`Alicia answers only what begins with "${name}"`}>
        <input type="checkbox" role="switch" aria-checked={on === true} checked={on === true} disabled={disabled || busy || on === undefined}
          onChange={(e) => void toggle(e.target.checked)} />
        Hands-free
      </label>
      {on && (
        <p data-testid="hands-free-notice" className="mt-1 text-slate-700 dark:text-slate-200">
          Alicia answers only when you start with '{name}'. Anything else you say is neither answered nor stored.
        </p>
      )}
      {on && notAddressed && (
        <p role="status" data-testid="not-addressed" className="mt-1 text-slate-600 italic dark:text-slate-300">
          Not addressed to {name}: not answered, not stored.
        </p>
      )}
      {error && <p role="alert" className="mt-1 text-red-700 dark:text-red-400">{error}</p>}
    </div>
  )
}
