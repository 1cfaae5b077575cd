// Improve Alicia: what matters in an answer (the dimensions' weights),
// whether installation-wide runs may learn from my conversations, runs of
// the prompt optimiser (started with a budget, watched, cancelled), their
// elites side by side with example answers, promoting one, and each
// component's versions with their votes and a rollback.
import { useState, type FormEvent } from 'react'
import { api } from '../api'
import { useApp } from '../store/app'
import type { OptimizeScope } from '../types'
import { useAction } from '../ui/hooks'
import { usePreferences, useRun, useRuns, useVersions } from './hooks'
import { budgetProblem, COMPONENTS, DEFAULT_BUDGET, DIMENSIONS, serving, statusLabel, weightsOf, type Dimension } from './logic'
import { RunView } from './RunView'
import { ComponentVersions } from './Versions'

const card = 'rounded-xl border border-slate-200 p-4 dark:border-slate-800'
const button = 'focus-ring rounded-lg bg-indigo-600 px-3 py-1.5 text-sm text-white hover:bg-indigo-500 disabled:opacity-50'
const alert = 'text-sm text-red-700 dark:text-red-400'

function Weights({ initial, onSave }: { initial: Record<Dimension, number>; onSave: (w: Record<Dimension, number>) => Promise<unknown> }) {
  const [w, setW] = useState(initial)
  const save = useAction()
  const [saved, setSaved] = useState(false)
  return (
    <form className="space-y-3" onSubmit={(e) => { e.preventDefault(); setSaved(false); void save.run(() => onSave(w)).then(setSaved) }}>
      <ul className="grid gap-x-6 gap-y-2 sm:grid-cols-2">
        {DIMENSIONS.map((d) => (
          <li key={d.key}>
            <label htmlFor={`w-${d.key}`} className="flex items-baseline justify-between gap-2 text-sm">
              <span>
                <span className="font-medium">{d.label}</span> <span className="text-xs text-slate-600 dark:text-slate-400">{d.hint}</span>
              </span>
              <output htmlFor={`w-${d.key}`} className="font-mono text-xs" data-testid={`weight-${d.key}`}>{w[d.key].toFixed(2)}</output>
            </label>
            <input id={`w-${d.key}`} type="range" min={0} max={1} step={0.05} value={w[d.key]} className="focus-ring w-full accent-indigo-600"
              onChange={(e) => { setSaved(false); setW({ ...w, [d.key]: Number(e.target.value) }) }} />
          </li>
        ))}
      </ul>
      <div className="flex flex-wrap items-center gap-3">
        <button type="submit" disabled={save.busy} className={button}>Save weights</button>
        {saved && <span role="status" className="text-sm text-emerald-700 dark:text-emerald-400">Saved: the next run weighs answers this way.</span>}
        {save.error && <span role="alert" className={alert}>{save.error}</span>}
      </div>
    </form>
  )
}

function StartRun({ onStart, busy }: { onStart: (budget: number, components: string[]) => Promise<boolean>; busy: boolean }) {
  const [budget, setBudget] = useState(String(DEFAULT_BUDGET))
  const [components, setComponents] = useState<string[]>(COMPONENTS.map((c) => c.key))
  const [problem, setProblem] = useState<string>()
  function submit(e: FormEvent) {
    e.preventDefault()
    const p = budgetProblem(budget) ?? (components.length === 0 ? 'Choose at least one part of the prompt to improve.' : undefined)
    setProblem(p)
    if (!p) void onStart(Number(budget), components)
  }
  return (
    <form className="flex flex-wrap items-end gap-4" onSubmit={submit} noValidate>
      <div>
        <label htmlFor="run-budget" className="block text-sm font-medium">Budget (metric calls)</label>
        <input id="run-budget" type="number" inputMode="numeric" min={1} max={100000} value={budget} onChange={(e) => setBudget(e.target.value)}
          className="focus-ring w-32 rounded border border-slate-300 bg-white px-2 py-1 dark:border-slate-700 dark:bg-slate-900" aria-describedby="run-budget-hint" />
      </div>
      <fieldset className="text-sm">
        <legend className="font-medium">Improve</legend>
        <div className="flex flex-wrap gap-3">
          {COMPONENTS.map((c) => (
            <label key={c.key} className="flex items-center gap-1">
              <input type="checkbox" className="focus-ring" checked={components.includes(c.key)}
                onChange={(e) => setComponents(e.target.checked ? [...components, c.key] : components.filter((x) => x !== c.key))} />
              {c.label}
            </label>
          ))}
        </div>
      </fieldset>
      <button type="submit" disabled={busy} className={button}>Start a run</button>
      <p id="run-budget-hint" className="w-full text-xs text-slate-600 dark:text-slate-400">
        A metric call is one stored answer replayed with a candidate prompt and judged. Runs wait for conversations: they never slow an answer.
      </p>
      {problem && <p role="alert" className={`w-full ${alert}`}>{problem}</p>}
    </form>
  )
}

export function Optimize() {
  const admin = useApp((s) => s.session?.admin ?? false)
  const [scope, setScope] = useState<OptimizeScope>('mine')
  // Bumped after a promotion or a rollback: the versions are read again.
  const [stamp, setStamp] = useState(0)
  const prefs = usePreferences(scope)
  const runs = useRuns(scope)
  const [picked, setPicked] = useState<string | null>(null)
  const shown = picked ?? runs.runs?.[0]?.id ?? null
  const watched = useRun(shown, runs.put)
  const start = useAction()
  const share = useAction()
  // What serves now, for the elites' diffs (a person without versions of
  // their own is served the installation's).
  const versions = {
    system: useVersions('system', scope, stamp),
    voice_style: useVersions('voice_style', scope, stamp),
  }
  const installation = {
    system: useVersions('system', 'installation', stamp, scope === 'mine'),
    voice_style: useVersions('voice_style', 'installation', stamp, scope === 'mine'),
  }
  const current: Record<string, string | undefined> = {}
  for (const c of COMPONENTS) current[c.key] = (serving(versions[c.key].versions ?? [])[0] ?? serving(installation[c.key].versions ?? [])[0])?.text

  async function startRun(budget: number, components: string[]) {
    return start.run(async () => {
      const run = await runs.start(budget, components)
      setPicked(run.id)
    })
  }

  return (
    <section className="mx-auto w-full max-w-5xl space-y-5 overflow-y-auto p-4" aria-labelledby="optimize-title">
      <div>
        <h1 id="optimize-title" className="text-xl font-semibold">Improve Alicia</h1>
        <p className="mt-1 text-sm text-slate-600 dark:text-slate-400">
          Alicia learns from your votes, notes and the judge's scores of her answers: a run tries new wordings of her prompts on answers you
          already had, and shows the best ones beside today's. Nothing changes until you promote one, and a rollback undoes it.
        </p>
      </div>
      {admin && (
        <fieldset className="flex flex-wrap gap-4 text-sm" aria-describedby="scope-hint">
          <legend className="mb-1 font-medium">Whose answers</legend>
          <label className="flex items-center gap-1">
            <input type="radio" name="scope" className="focus-ring" checked={scope === 'mine'} onChange={() => { setScope('mine'); setPicked(null) }} /> Mine
          </label>
          <label className="flex items-center gap-1">
            <input type="radio" name="scope" className="focus-ring" checked={scope === 'installation'} onChange={() => { setScope('installation'); setPicked(null) }} /> Everyone's (installation)
          </label>
          <p id="scope-hint" className="w-full text-xs text-slate-600 dark:text-slate-400">
            An installation-wide run learns from the administrators' conversations and those of the people who share theirs, and changes what serves everyone without versions of their own.
          </p>
        </fieldset>
      )}
      {prefs.error && <p role="alert" className={alert}>{prefs.error}</p>}
      <div className={card}>
        <h2 className="mb-2 font-medium">What matters in an answer</h2>
        {prefs.preferences ? (
          <Weights key={prefs.preferences.scope} initial={weightsOf(prefs.preferences.weights)} onSave={(w) => prefs.save(w)} />
        ) : (
          <p className="text-sm text-slate-500">Loading…</p>
        )}
        <label className="mt-4 flex items-start gap-2 border-t border-slate-200 pt-3 text-sm dark:border-slate-800">
          <input type="checkbox" className="focus-ring mt-1" checked={prefs.share ?? false} disabled={prefs.share === undefined || share.busy}
            onChange={(e) => void share.run(() => prefs.setShare(e.target.checked))} />
          <span>
            Let installation-wide runs learn from my conversations
            <span className="block text-xs text-slate-600 dark:text-slate-400">An administrator's run may then replay your answers to improve Alicia for everyone.</span>
          </span>
        </label>
        {share.error && <p role="alert" className={alert}>{share.error}</p>}
      </div>
      <div className={card}>
        <h2 className="mb-2 font-medium">Start a run</h2>
        <StartRun onStart={startRun} busy={start.busy} />
        {start.error && <p role="alert" className={`mt-2 ${alert}`}>{start.error}</p>}
      </div>
      <div className={card}>
        <h2 className="mb-2 font-medium">Runs</h2>
        {runs.error && <p role="alert" className={alert}>{runs.error}</p>}
        {runs.runs && runs.runs.length === 0 && <p className="text-sm text-slate-600 dark:text-slate-400">No runs yet.</p>}
        {runs.runs && runs.runs.length > 0 && (
          <ul className="mb-3 flex flex-wrap gap-2 text-sm" aria-label="Runs">
            {runs.runs.map((r) => (
              <li key={r.id}>
                <button type="button" aria-pressed={r.id === shown} onClick={() => setPicked(r.id)}
                  className={`focus-ring rounded-lg border px-2 py-1 ${r.id === shown ? 'border-indigo-500 bg-indigo-50 dark:bg-indigo-950' : 'border-slate-300 dark:border-slate-700'}`}>
                  {new Date(r.createdAt).toLocaleString()} · {statusLabel(r)}
                </button>
              </li>
            ))}
          </ul>
        )}
        {watched.error && <p role="alert" className={alert}>{watched.error}</p>}
        {watched.run && (
          <RunView run={watched.run} current={current}
            onCancel={async () => watched.set(await api.cancelOptimizationRun(watched.run!.id))}
            onPromote={async (candidateId, rolloutShare) => {
              const id = watched.run!.id
              await api.selectElite(id, candidateId, rolloutShare)
              watched.set(await api.optimizationRun(id))
              setStamp((s) => s + 1)
            }} />
        )}
      </div>
      <div className={card}>
        <h2 className="mb-1 font-medium">Versions of the prompts</h2>
        <p className="mb-3 text-xs text-slate-600 dark:text-slate-400">
          {scope === 'mine' ? 'Your own versions: they shape only your answers. Without one, the installation’s serves you.' : 'The installation’s versions: they serve everyone without a version of their own.'}
        </p>
        <div className="space-y-4">
          {COMPONENTS.map((c) => (
            <ComponentVersions key={c.key} component={c.key} scope={scope} handle={versions[c.key]} onChange={() => setStamp((s) => s + 1)} />
          ))}
        </div>
      </div>
    </section>
  )
}
