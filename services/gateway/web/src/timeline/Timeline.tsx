// The debug timeline of a conversation: its envelopes as the stream holds
// them (what `alicia replay` prints), page by page, then live.
import { href, navigate } from '../router'
import { useTimeline } from './hooks'

export function Timeline({ id }: { id: string }) {
  const { steps, more, live, forbidden, error, loadMore } = useTimeline(id)

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
            <button type="button" onClick={loadMore} className="focus-ring rounded border border-slate-300 px-3 py-1 text-sm dark:border-slate-700">
              Load more
            </button>
          </div>
        )}
      </div>
    </section>
  )
}
