// The hooks over ./resource.ts: useResource reads while its key is the
// same and again when it changes; useAction runs the changes a view asks
// for. A feature's hooks (src/<feature>/hooks.ts) build on these with the
// api calls of that feature; views call the features' hooks.
import { useCallback, useEffect, useLayoutEffect, useRef, useState, useSyncExternalStore } from 'react'
import { Action, Resource, type Fetcher, type ResourceState } from './resource'

export interface ResourceHandle<T> extends ResourceState<T> {
  // reload reads again with the hook's fetcher.
  reload(): Promise<void>
  // more reads a next page with fetch and merges it into what is there.
  more(fetch: Fetcher<T>, merge: (had: T | undefined, got: T) => T): Promise<void>
  update(fn: (had: T | undefined) => T | undefined): void
}

// useResource reads with fetcher when the view mounts and whenever key
// changes (null: read nothing). The fetcher may close over anything: the
// latest one is used, and key says when a read is due.
export function useResource<T>(key: string | null, fetcher: Fetcher<T>): ResourceHandle<T> {
  const [res] = useState(() => new Resource<T>())
  const latest = useRef(fetcher)
  useLayoutEffect(() => {
    latest.current = fetcher
  })
  useEffect(() => {
    if (key === null) return
    void res.load((signal) => latest.current(signal))
    return () => res.abort()
  }, [key, res])
  const state = useSyncExternalStore(res.subscribe, res.get)
  const reload = useCallback(() => res.load((signal) => latest.current(signal)), [res])
  const more = useCallback((fetch: Fetcher<T>, merge: (had: T | undefined, got: T) => T) => res.load(fetch, merge), [res])
  const update = useCallback((fn: (had: T | undefined) => T | undefined) => res.update(fn), [res])
  return { ...state, reload, more, update }
}

export interface ActionHandle {
  busy: boolean
  error?: string
  // run does fn; a failure shows in error. It resolves to whether fn succeeded.
  run(fn: () => Promise<unknown>): Promise<boolean>
  clear(): void
}

// useAction: the changes a view asks of the server, one at a time in its
// busy flag, their failure in error. say turns a failure into the sentence
// shown (the default: the error's message, the server's for an ApiError).
export function useAction(say?: (e: unknown) => string): ActionHandle {
  const [action] = useState(() => new Action(say))
  const state = useSyncExternalStore(action.subscribe, action.get)
  const run = useCallback((fn: () => Promise<unknown>) => action.run(fn), [action])
  const clear = useCallback(() => action.clear(), [action])
  return { ...state, run, clear }
}
