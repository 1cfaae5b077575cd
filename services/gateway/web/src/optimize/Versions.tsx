// A prompt component's versions in a scope: which serve now (and to what
// share of new conversations), where each came from, how its answers were
// voted and judged, its text, and the one-click rollback.
import type { OptimizeScope, PromptVersion } from '../types'
import { useAction } from '../ui/hooks'
import type { useVersions } from './hooks'
import { componentLabel, pct, voteRate } from './logic'

function origin(v: PromptVersion): string {
  if (v.createdBy === 'seed') return 'the built-in prompt'
  if (v.createdBy.startsWith('run:')) return `a run (${v.createdBy.slice(4)})`
  if (v.createdBy.startsWith('user:')) return 'written by hand'
  return v.createdBy
}

function Version({ v }: { v: PromptVersion }) {
  const j = v.judged
  return (
    <li className="space-y-1 rounded-lg border border-slate-200 p-2 text-sm dark:border-slate-800" data-testid="version" data-status={v.status} data-version={v.version} data-version-id={v.id}>
      <div className="flex flex-wrap items-center gap-2">
        <span className="font-medium">Version {v.version}</span>
        <span className={`rounded-full px-2 py-0.5 text-xs ${
          v.status === 'active' ? 'bg-emerald-100 text-emerald-900 dark:bg-emerald-950 dark:text-emerald-200' : 'bg-slate-100 text-slate-700 dark:bg-slate-800 dark:text-slate-300'}`}>
          {v.status === 'active' ? (v.rolloutShare !== undefined ? `serving ${pct(v.rolloutShare)} of new conversations` : 'serving') : v.status}
        </span>
        <span className="text-xs text-slate-600 dark:text-slate-400">from {origin(v)}, {new Date(v.createdAt).toLocaleString()}</span>
      </div>
      <p className="text-xs text-slate-700 dark:text-slate-300" data-testid="vote-rate">{voteRate(v)}</p>
      {j && j.count > 0 && (
        <p className="text-xs text-slate-700 dark:text-slate-300">
          Judged on {j.count} {j.count === 1 ? 'answer' : 'answers'}: correctness {pct(j.correctness.estimate)} ({pct(j.correctness.low)}–{pct(j.correctness.high)}),
          faithfulness {pct(j.faithfulness.estimate)} ({pct(j.faithfulness.low)}–{pct(j.faithfulness.high)}), relevancy {pct(j.relevancy.estimate)} ({pct(j.relevancy.low)}–{pct(j.relevancy.high)})
        </p>
      )}
      <details>
        <summary className="focus-ring cursor-pointer text-xs text-slate-600 dark:text-slate-400">Text</summary>
        <p className="mt-1 text-xs whitespace-pre-wrap">{v.text}</p>
      </details>
    </li>
  )
}

export function ComponentVersions({ component, scope, handle, onChange }: {
  component: string
  scope: OptimizeScope
  handle: ReturnType<typeof useVersions>
  onChange: () => void
}) {
  const rollback = useAction()
  const list = handle.versions
  const label = componentLabel(component)
  const active = list?.some((v) => v.status === 'active') ?? false
  return (
    <section aria-label={`${label} versions`} data-testid={`versions-${component}`}>
      <div className="mb-1 flex flex-wrap items-center justify-between gap-2">
        <h3 className="text-sm font-medium">{label}</h3>
        <button type="button" disabled={!active || rollback.busy}
          onClick={() => void rollback.run(handle.rollback).then((ok) => ok && onChange())}
          className="focus-ring rounded-lg border border-slate-300 px-2 py-0.5 text-sm hover:bg-slate-100 disabled:opacity-50 dark:border-slate-700 dark:hover:bg-slate-800">
          Roll back {label.toLowerCase()}
        </button>
      </div>
      {rollback.error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{rollback.error}</p>}
      {handle.error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{handle.error}</p>}
      {list === undefined ? (
        <p className="text-sm text-slate-500">Loading…</p>
      ) : list.length === 0 ? (
        <p className="text-sm text-slate-600 dark:text-slate-400">{scope === 'mine' ? 'No version of your own: the installation’s serves you.' : 'No versions.'}</p>
      ) : (
        <ul className="space-y-1">
          {list.map((v) => <Version key={v.id} v={v} />)}
        </ul>
      )}
    </section>
  )
}
