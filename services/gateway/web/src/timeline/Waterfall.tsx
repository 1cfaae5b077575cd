// Where an answer's time went: end of speech (or the message sent) →
// transcript → answer started → first sentence → first audio, from the
// stream's timestamps of the conversation's envelopes (its timeline).
import { marks, stepsUntil, timing, type Timing } from '../chat/timeline'
import { useResource } from '../ui/hooks'

export function Waterfall({ conversationId, answerId, live }: { conversationId: string; answerId: string; live: string }) {
  // Read on until the answer's last mark is there (or the stream ends);
  // live changes as the answer goes on (its sentences, its audio): read again.
  const { data: t, error } = useResource<Timing | undefined>(JSON.stringify([conversationId, answerId, live]), () =>
    stepsUntil(conversationId, (steps) => {
      const x = timing(steps, answerId)
      return x !== undefined && x.firstSentence !== undefined && (!x.voice || x.firstAudio !== undefined)
    }).then((steps) => timing(steps, answerId)),
  )

  if (error) return <p className="text-xs text-red-700 dark:text-red-400">Timing unavailable: {error}</p>
  if (!t) return <p className="text-xs text-slate-500">Reading the timeline…</p>
  const ms = marks(t)
  const first = ms[0]
  if (!first || ms.length < 2) return <p className="text-xs text-slate-500">No timing recorded.</p>
  const total = Math.max(1, (ms.at(-1)?.at ?? first.at) - first.at)
  const colours = ['bg-sky-500', 'bg-indigo-500', 'bg-violet-500', 'bg-emerald-600']
  return (
    <figure className="w-full max-w-md text-xs text-slate-600 dark:text-slate-300" data-testid="waterfall">
      <figcaption className="sr-only">Where the time went</figcaption>
      <div className="flex h-2 w-full overflow-hidden rounded bg-slate-100 dark:bg-slate-800" aria-hidden="true">
        {ms.slice(1).map((m, i) => (
          <div key={m.label} className={colours[i % colours.length]} style={{ width: `${((m.at - (ms[i]?.at ?? m.at)) / total) * 100}%` }} />
        ))}
      </div>
      <ol className="mt-1 flex flex-wrap gap-x-3 gap-y-0.5">
        {ms.slice(1).map((m, i) => (
          <li key={m.label} data-mark={m.label}>
            <span className={`mr-1 inline-block h-2 w-2 rounded-sm ${colours[i % colours.length]}`} aria-hidden="true" />
            {m.label} <span className="tabular-nums">+{Math.round(m.at - (ms[i]?.at ?? m.at))} ms</span>
          </li>
        ))}
        <li className="font-medium">
          {first.label} → {ms.at(-1)?.label}: <span className="tabular-nums">{Math.round(total)} ms</span>
        </li>
      </ol>
    </figure>
  )
}
