// The debug timeline of a conversation: its envelopes as the stream holds
// them (what `alicia replay` prints), page by page, then live.
import { useEffect, useRef, useState } from 'react'
import { api, ApiError } from '../api'
import type { Step } from '../chat/timeline'
import { href, navigate } from '../router'

const PAGE = 200

export function Timeline({ id }: { id: string }) {
  const [steps, setSteps] = useState<Step[]>([])
  const [next, setNext] = useState(0)
  const [more, setMore] = useState(true)
  const [live, setLive] = useState<'off' | 'on' | 'lost'>('off')
  const [error, setError] = useState<string>()
  const [forbidden, setForbidden] = useState(false)
  const loading = useRef(false)

  async function load(after: number) {
    if (loading.current) return
    loading.current = true
    try {
      const page = await api.timeline(id, after, PAGE)
      setSteps((s) => [...s, ...page.steps])
      setNext(page.next)
      setMore(page.more)
      setError(undefined)
    } catch (e) {
      if (e instanceof ApiError && (e.status === 403 || e.status === 404)) setForbidden(true)
      else setError(e instanceof Error ? e.message : String(e))
    } finally {
      loading.current = false
    }
  }

  useEffect(() => {
    setSteps([])
    setNext(0)
    setMore(true)
    setForbidden(false)
    void load(0)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id])

  // Once every stored step is read, new ones come as they are stored.
  useEffect(() => {
    if (more || forbidden) return
    const es = new EventSource(`/v1/conversations/${encodeURIComponent(id)}/timeline/stream?after=${next}`)
    es.addEventListener('step', (e) => {
      const st = JSON.parse((e as MessageEvent<string>).data) as Step
      setSteps((s) => (s.length > 0 && s[s.length - 1]!.seq >= st.seq ? s : [...s, st]))
    })
    // Revoked (signed out, the conversation deleted): the server says why
    // and ends the stream; reconnecting would only be refused.
    es.addEventListener('revoked', () => {
      es.close()
      setLive('off')
    })
    es.onopen = () => setLive('on')
    es.onerror = () => setLive('lost')
    return () => {
      es.close()
      setLive('off')
    }
    // The stream resumes by itself (Last-Event-ID); next only starts it.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [more, forbidden, id])

  if (forbidden)
    return (
      <section className="m-auto max-w-md p-6 text-center">
        <h1 className="text-xl font-semibold">This conversation is not yours</h1>
      </section>
    )
  return (
    <section className="flex min-h-0 flex-1 flex-col" aria-labelledby="timeline-title">
      <header className="flex flex-wrap items-center justify-between gap-2 border-b border-slate-200 px-4 py-2 dark:border-slate-800">
        <h1 id="timeline-title" className="text-base font-semibold">Debug timeline</h1>
        <div className="flex items-center gap-3 text-sm">
          <span role="status" data-testid="timeline-live" data-live={live}>{live === 'on' ? 'Live' : live === 'lost' ? 'Reconnecting…' : 'Not live'}</span>
          <a href={href({ name: 'conversation', id })} onClick={(e) => { e.preventDefault(); navigate({ name: 'conversation', id }) }} className="focus-ring rounded text-indigo-700 underline dark:text-indigo-300">
            Back to the conversation
          </a>
        </div>
      </header>
      {error && <p role="alert" className="m-3 text-sm text-red-700 dark:text-red-400">{error}</p>}
      <div className="focus-ring flex-1 overflow-auto" tabIndex={0} role="region" aria-label="Envelopes">
        <table className="w-full border-collapse text-left font-mono text-xs" data-testid="timeline">
          <caption className="sr-only">Every envelope of the conversation, in the order the stream stored it</caption>
          <thead className="sticky top-0 bg-white dark:bg-slate-950">
            <tr className="border-b border-slate-200 dark:border-slate-800">
              <th scope="col" className="px-2 py-1 text-right">offset</th>
              <th scope="col" className="px-2 py-1 text-right">gap</th>
              <th scope="col" className="px-2 py-1">origin</th>
              <th scope="col" className="px-2 py-1">type</th>
              <th scope="col" className="px-2 py-1">summary</th>
            </tr>
          </thead>
          <tbody>
            {steps.map((s) => (
              <tr key={s.seq} data-seq={s.seq} data-type={s.type} className="border-b border-slate-100 align-top dark:border-slate-900">
                <td className="px-2 py-0.5 text-right tabular-nums">{(s.offsetMs / 1000).toFixed(3)}s</td>
                <td className="px-2 py-0.5 text-right tabular-nums">+{s.gapMs}ms</td>
                <td className="px-2 py-0.5">{s.origin}</td>
                <td className="px-2 py-0.5">{s.type}</td>
                <td className="px-2 py-0.5 break-all whitespace-pre-wrap">{s.error ? `error: ${s.error}` : s.summary}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {more && (
          <div className="p-3 text-center">
            <button type="button" onClick={() => void load(next)} className="focus-ring rounded border border-slate-300 px-3 py-1 text-sm dark:border-slate-700">
              Load more
            </button>
          </div>
        )}
      </div>
    </section>
  )
}
