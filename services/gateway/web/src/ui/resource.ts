// The one way a view reads from the server and acts on it. A Resource is
// what was read (data), whether a read is under way (loading) and why the
// last one failed (error); an Action is a change asked of the server,
// whether it is under way (busy) and why it failed. Both are small stores
// the hooks of ./hooks.ts subscribe to, so the logic is tested without a
// page (resource.test.ts) and a view never wraps api.* in try/catch.
import { ApiError } from '../api'
import { messageOf } from './errors'

export interface ResourceState<T> {
  data?: T
  loading: boolean
  // The last read's or change's failure, as the page says it.
  error?: string
  // The failed request's HTTP status (0: the server could not be reached).
  status?: number
}

type Listener = () => void

class Store<S> {
  private listeners = new Set<Listener>()
  constructor(protected state: S) {}
  subscribe = (l: Listener): (() => void) => {
    this.listeners.add(l)
    return () => {
      this.listeners.delete(l)
    }
  }
  get = (): S => this.state
  protected put(patch: Partial<S>) {
    this.state = { ...this.state, ...patch }
    this.listeners.forEach((l) => l())
  }
}

export type Fetcher<T> = (signal: AbortSignal) => Promise<T>

export class Resource<T> extends Store<ResourceState<T>> {
  private inFlight?: AbortController

  constructor(initial?: T) {
    super({ data: initial, loading: false })
  }

  // load reads with fetch and keeps what it gives (merged with what was
  // there by merge, for a next page). A newer load (or abort) wins: what
  // an older one brings later is dropped.
  async load(fetch: Fetcher<T>, merge?: (had: T | undefined, got: T) => T): Promise<void> {
    this.inFlight?.abort()
    const ab = new AbortController()
    this.inFlight = ab
    this.put({ loading: true, error: undefined, status: undefined })
    try {
      const got = await fetch(ab.signal)
      if (ab.signal.aborted) return
      this.put({ data: merge ? merge(this.state.data, got) : got, loading: false })
    } catch (e) {
      if (ab.signal.aborted) return
      this.put({ loading: false, error: messageOf(e), status: e instanceof ApiError ? e.status : undefined })
    } finally {
      if (this.inFlight === ab) this.inFlight = undefined
    }
  }

  // update changes what was read (after a change the server confirmed).
  update(fn: (had: T | undefined) => T | undefined): void {
    this.put({ data: fn(this.state.data) })
  }

  // abort forgets the read under way.
  abort(): void {
    this.inFlight?.abort()
    this.inFlight = undefined
    if (this.state.loading) this.put({ loading: false })
  }
}

export interface ActionState {
  busy: boolean
  error?: string
}

export class Action extends Store<ActionState> {
  constructor(private readonly say: (e: unknown) => string = messageOf) {
    super({ busy: false })
  }

  // run does fn; its failure becomes error (said by say) instead of being
  // thrown. It returns whether fn succeeded.
  async run(fn: () => Promise<unknown>): Promise<boolean> {
    this.put({ busy: true, error: undefined })
    try {
      await fn()
      this.put({ busy: false })
      return true
    } catch (e) {
      this.put({ busy: false, error: this.say(e) })
      return false
    }
  }

  clear(): void {
    if (this.state.error !== undefined) this.put({ error: undefined })
  }
}
