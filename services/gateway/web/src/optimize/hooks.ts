// The "Improve Alicia" page's reads and changes (/v1/optimize/…,
// /v1/prompt-versions…), on the one hook pattern of src/ui/hooks.ts, and
// watchRun, which follows a run while it may still move.
import { useEffect, useState } from 'react'
import { api } from '../api'
import type { OptimizationRun, OptimizeScope, PromptVersion } from '../types'
import { useResource } from '../ui/hooks'
import { messageOf } from '../ui/errors'
import { live, POLL_MS } from './logic'

// watchRun reads run id now and then every `every` ms while it is queued
// or running, giving each read to onRun (a failed read to onError, and
// it tries again); it stops once the run ended or stop is called.
export function watchRun(
  id: string,
  read: (id: string, signal: AbortSignal) => Promise<OptimizationRun>,
  onRun: (r: OptimizationRun) => void,
  onError: (e: unknown) => void,
  every = POLL_MS,
): () => void {
  const ab = new AbortController()
  let timer: ReturnType<typeof setTimeout> | undefined
  const tick = async () => {
    let again = true
    try {
      const r = await read(id, ab.signal)
      if (ab.signal.aborted) return
      onRun(r)
      again = live(r.status)
    } catch (e) {
      if (ab.signal.aborted) return
      onError(e)
    }
    if (again) timer = setTimeout(() => void tick(), every)
  }
  void tick()
  return () => {
    ab.abort()
    if (timer !== undefined) clearTimeout(timer)
  }
}

// usePreferences: the scope's dimension weights and, for a person, whether
// installation-wide runs may learn from their conversations.
export function usePreferences(scope: OptimizeScope) {
  const prefs = useResource(`prefs:${scope}`, (signal) => api.optimizePreferences(scope, signal))
  const sharing = useResource('sharing', (signal) => api.optimizeSharing(signal))
  return {
    preferences: prefs.data,
    share: sharing.data?.share,
    error: prefs.error ?? sharing.error,
    save: async (weights: Record<string, number>) => {
      const p = await api.putOptimizePreferences(scope, weights)
      prefs.update(() => p)
    },
    setShare: async (share: boolean) => {
      const s = await api.putOptimizeSharing(share)
      sharing.update(() => s)
    },
  }
}

// useRuns: the scope's runs, newest first, and starting one.
export function useRuns(scope: OptimizeScope) {
  const r = useResource(`runs:${scope}`, (signal) => api.optimizationRuns(scope, signal))
  return {
    runs: r.data?.runs,
    error: r.error,
    reload: r.reload,
    start: async (budget: number, components: string[]) => {
      const run = await api.startOptimizationRun(scope, budget, components)
      r.update((had) => ({ runs: [run, ...(had?.runs ?? []).filter((x) => x.id !== run.id)] }))
      return run
    },
    // put keeps a run read since (its progress) in the list.
    put: (run: OptimizationRun) => r.update((had) => had && { runs: had.runs.map((x) => (x.id === run.id ? { ...run, elites: [] } : x)) }),
  }
}

// useRun follows run id (null: none) while it may move.
export function useRun(id: string | null, onRead?: (r: OptimizationRun) => void) {
  const [state, setState] = useState<{ id: string; run?: OptimizationRun; error?: string }>()
  useEffect(() => {
    if (!id) return
    return watchRun(
      id,
      (x, signal) => api.optimizationRun(x, signal),
      (run) => {
        setState({ id, run })
        onRead?.(run)
      },
      (e) => setState((had) => ({ id, run: had?.id === id ? had.run : undefined, error: messageOf(e) })),
    )
    // onRead is the list's put, which never changes meaning.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id])
  const mine = state?.id === id ? state : undefined
  return {
    run: mine?.run,
    error: mine?.error,
    // set keeps what a change answered (a cancel, a promotion's mark).
    set: (run: OptimizationRun) => id && setState({ id, run }),
  }
}

// useVersions: the versions of a component in a scope, newest first, and
// the changes to them (the page reads them again after one: stamp).
// enabled false reads nothing.
export function useVersions(component: string, scope: OptimizeScope, stamp: number, enabled = true) {
  const r = useResource(enabled ? `versions:${component}:${scope}:${stamp}` : null, (signal) => api.promptVersions(component, scope, signal))
  return {
    versions: r.data?.versions as PromptVersion[] | undefined,
    error: r.error,
    reload: r.reload,
    rollback: () => api.rollbackPrompt(component, scope),
    promote: (id: string, share?: number) => api.promotePromptVersion(id, share),
  }
}
