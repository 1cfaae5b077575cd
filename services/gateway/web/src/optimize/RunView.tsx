// One run: its progress while it runs (metric calls of the budget, the
// Pareto front's size, the best score per dimension), why it failed, and
// once it ended its elites side by side, each with its scores, what it
// changes and example answers beside today's, and the promotion.
import { useId, useState } from 'react'
import type { Elite, OptimizationRun } from '../types'
import { useAction } from '../ui/hooks'
import { changes, componentLabel, DIMENSIONS, live, pct, progress, promotable, shareOf, statusLabel, wordDiff } from './logic'

function dimensionLabel(key: string): string {
  return DIMENSIONS.find((d) => d.key === key)?.label ?? key
}

function Scores({ scores, label }: { scores: Record<string, number>; label: string }) {
  const keys = [...DIMENSIONS.map((d) => d.key as string).filter((k) => k in scores), ...Object.keys(scores).filter((k) => !DIMENSIONS.some((d) => d.key === k))]
  if (keys.length === 0) return <p className="text-xs text-slate-500">No scores yet.</p>
  return (
    <div role="group" aria-label={label}>
    <dl className="grid grid-cols-[auto_1fr_auto] items-center gap-x-2 gap-y-1 text-xs">
      {keys.map((k) => (
        <div key={k} className="contents" data-testid={`score-${k}`}>
          <dt>{dimensionLabel(k)}</dt>
          <dd className="h-1.5 rounded bg-slate-200 dark:bg-slate-800" aria-hidden="true">
            <div className="h-1.5 rounded bg-indigo-500" style={{ width: `${Math.round(Math.min(1, Math.max(0, scores[k] ?? 0)) * 100)}%` }} />
          </dd>
          <dd className="text-right font-mono">{pct(scores[k])}</dd>
        </div>
      ))}
    </dl>
    </div>
  )
}

function Diff({ before, after }: { before?: string; after: string }) {
  if (before === undefined) return <p className="text-sm whitespace-pre-wrap">{after}</p>
  return (
    <p className="text-sm leading-relaxed" data-testid="diff">
      {wordDiff(before, after).map((p, i) =>
        p.kind === 'same' ? (
          <span key={i}>{p.text} </span>
        ) : p.kind === 'added' ? (
          <ins key={i} className="rounded bg-emerald-100 text-emerald-900 no-underline dark:bg-emerald-950 dark:text-emerald-200">{p.text} </ins>
        ) : (
          <del key={i} className="rounded bg-red-100 text-red-900 dark:bg-red-950 dark:text-red-200">{p.text} </del>
        ),
      )}
    </p>
  )
}

function Promote({ onPromote }: { onPromote: (share?: number) => Promise<unknown> }) {
  const [mode, setMode] = useState<'all' | 'share'>('all')
  const [percent, setPercent] = useState('20')
  const act = useAction()
  const [problem, setProblem] = useState<string>()
  const group = useId()
  return (
    <form className="space-y-2 border-t border-slate-200 pt-2 text-sm dark:border-slate-800"
      onSubmit={(e) => {
        e.preventDefault()
        const s = shareOf(mode, percent)
        setProblem(s.problem)
        if (!s.problem) void act.run(() => onPromote(s.share))
      }}>
      <fieldset className="space-y-1">
        <legend className="font-medium">Serve it to</legend>
        <label className="flex items-center gap-1">
          <input type="radio" name={group} className="focus-ring" checked={mode === 'all'} onChange={() => setMode('all')} /> all new conversations
        </label>
        <label className="flex flex-wrap items-center gap-1">
          <input type="radio" name={group} className="focus-ring" checked={mode === 'share'} onChange={() => setMode('share')} /> a share of them, first:
          <input type="number" min={1} max={99} value={percent} aria-label="Share of new conversations (%)" disabled={mode !== 'share'}
            onChange={(e) => setPercent(e.target.value)}
            className="focus-ring w-16 rounded border border-slate-300 bg-white px-1 dark:border-slate-700 dark:bg-slate-900" /> %
        </label>
      </fieldset>
      <button type="submit" disabled={act.busy} className="focus-ring rounded-lg bg-emerald-700 px-3 py-1.5 text-white hover:bg-emerald-600 disabled:opacity-50">Promote</button>
      {(problem ?? act.error) && <p role="alert" className="text-red-700 dark:text-red-400">{problem ?? act.error}</p>}
    </form>
  )
}

function EliteCard({ e, rank, current, canPromote, onPromote }: {
  e: Elite
  rank: number
  current: Record<string, string | undefined>
  canPromote: boolean
  onPromote: (share?: number) => Promise<unknown>
}) {
  const title = `Candidate ${rank + 1}`
  return (
    <article className="min-w-0 space-y-3 rounded-lg border border-slate-200 p-3 dark:border-slate-800" aria-label={title} data-testid="elite">
      <header className="flex flex-wrap items-baseline justify-between gap-2">
        <h4 className="font-medium">{title}{rank === 0 && <span className="ml-1 text-xs font-normal text-slate-600 dark:text-slate-400">best by your weights</span>}</h4>
        <span className="text-xs text-slate-600 dark:text-slate-400">
          {e.weighted !== undefined && <>weighted {pct(e.weighted)}</>}
          {e.bestOn !== undefined && <> · best on {e.bestOn} {e.bestOn === 1 ? 'example' : 'examples'}</>}
        </span>
      </header>
      <Scores scores={e.scores} label={`${title}: scores`} />
      <div className="space-y-2">
        {changes(e, current).map((c) => (
          <div key={c.component}>
            <h5 className="text-xs font-medium tracking-wide text-slate-600 uppercase dark:text-slate-400">{componentLabel(c.component)}{c.before === undefined ? '' : ': changes'}</h5>
            <Diff before={c.before} after={c.after} />
          </div>
        ))}
      </div>
      {e.examples.length > 0 && (
        <div className="space-y-2">
          <h5 className="text-xs font-medium tracking-wide text-slate-600 uppercase dark:text-slate-400">Example answers</h5>
          {e.examples.map((x) => (
            <figure key={x.messageId} className="space-y-1 text-sm" data-testid="example">
              <figcaption className="font-medium">“{x.question}”</figcaption>
              <div className="grid gap-2 sm:grid-cols-2">
                <div className="rounded bg-slate-100 p-2 dark:bg-slate-900">
                  <div className="text-xs text-slate-600 dark:text-slate-400">Today</div>
                  <p className="whitespace-pre-wrap" data-testid="example-current">{x.current}</p>
                </div>
                <div className="rounded bg-indigo-50 p-2 dark:bg-indigo-950">
                  <div className="text-xs text-slate-600 dark:text-slate-300">This candidate</div>
                  <p className="whitespace-pre-wrap" data-testid="example-candidate">{x.candidate}</p>
                </div>
              </div>
            </figure>
          ))}
        </div>
      )}
      {e.promotedAt !== undefined ? (
        <p role="status" className="text-sm text-emerald-700 dark:text-emerald-400">Promoted {new Date(e.promotedAt).toLocaleString()}</p>
      ) : (
        canPromote && <Promote onPromote={onPromote} />
      )}
    </article>
  )
}

export function RunView({ run, current, onCancel, onPromote }: {
  run: OptimizationRun
  current: Record<string, string | undefined>
  onCancel: () => Promise<unknown>
  onPromote: (candidateId: string, share?: number) => Promise<unknown>
}) {
  const cancel = useAction()
  const moving = live(run.status)
  return (
    <div className="space-y-3" data-testid="run" data-status={run.status} data-run-id={run.id}>
      <div className="flex flex-wrap items-center gap-2 text-sm">
        <span className={`rounded-full px-2 py-0.5 text-xs font-medium ${
          run.status === 'done' ? 'bg-emerald-100 text-emerald-900 dark:bg-emerald-950 dark:text-emerald-200'
            : run.status === 'failed' ? 'bg-red-100 text-red-900 dark:bg-red-950 dark:text-red-200'
            : 'bg-slate-100 text-slate-800 dark:bg-slate-800 dark:text-slate-200'}`} data-testid="run-status">
          {statusLabel(run)}
        </span>
        <span className="text-slate-600 dark:text-slate-400">{run.components.map(componentLabel).join(', ')}</span>
        {moving && (
          <button type="button" disabled={cancel.busy} onClick={() => void cancel.run(onCancel)}
            className="focus-ring ml-auto rounded-lg border border-slate-300 px-2 py-0.5 hover:bg-slate-100 dark:border-slate-700 dark:hover:bg-slate-800">
            Cancel run
          </button>
        )}
      </div>
      {cancel.error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{cancel.error}</p>}
      <div>
        <div role="progressbar" aria-label="Metric calls spent" aria-valuemin={0} aria-valuemax={run.budget} aria-valuenow={run.metricCalls}
          className="h-2 overflow-hidden rounded bg-slate-200 dark:bg-slate-800">
          <div className={`h-2 ${moving ? 'bg-indigo-500' : run.status === 'failed' ? 'bg-red-500' : 'bg-emerald-500'}`} style={{ width: `${Math.round(progress(run) * 100)}%` }} />
        </div>
        <p className="mt-1 text-xs text-slate-600 dark:text-slate-400" data-testid="run-progress">
          {run.metricCalls} of {run.budget} metric calls · iteration {run.iteration} · {run.frontSize} on the front
        </p>
      </div>
      {run.status === 'failed' && <p role="alert" className="text-sm text-red-700 dark:text-red-400">The run failed: {run.error ?? 'no reason given'}</p>}
      <div>
        <h3 className="mb-1 text-sm font-medium">Best so far</h3>
        <Scores scores={run.bestScores} label="Best scores per dimension" />
      </div>
      {run.elites.length > 0 && (
        <div>
          <h3 className="mb-2 text-sm font-medium">Elites: the best candidates, side by side</h3>
          <div className="grid gap-3 [grid-template-columns:repeat(auto-fit,minmax(min(100%,18rem),1fr))]">
            {run.elites.map((e, i) => (
              <EliteCard key={e.candidateId} e={e} rank={i} current={current} canPromote={promotable(run)} onPromote={(s) => onPromote(e.candidateId, s)} />
            ))}
          </div>
        </div>
      )}
      {!moving && run.status !== 'failed' && run.elites.length === 0 && (
        <p className="text-sm text-slate-600 dark:text-slate-400">This run found nothing better than what serves now.</p>
      )}
    </div>
  )
}
