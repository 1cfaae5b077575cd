import { describe, expect, it } from 'vitest'
import { ApiError } from '../api'
import { Action, Resource } from './resource'

function deferred<T>() {
  let resolve!: (v: T) => void
  let reject!: (e: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

describe('Resource', () => {
  it('is loading while it reads, then holds the data, and tells its subscribers each time', async () => {
    const r = new Resource<number[]>()
    let told = 0
    r.subscribe(() => told++)
    const d = deferred<number[]>()
    const done = r.load(() => d.promise)
    expect(r.get()).toMatchObject({ loading: true, data: undefined })
    d.resolve([1, 2])
    await done
    expect(r.get()).toEqual({ loading: false, data: [1, 2], error: undefined, status: undefined })
    expect(told).toBe(2)
  })

  it('says why a read failed, with the status of an API error, and keeps what it had', async () => {
    const r = new Resource<string>('before')
    await r.load(async () => {
      throw new ApiError(403, 'not yours')
    })
    expect(r.get()).toMatchObject({ loading: false, data: 'before', error: 'not yours', status: 403 })
    await r.load(async () => 'after')
    expect(r.get()).toMatchObject({ data: 'after', error: undefined, status: undefined })
  })

  it('a newer read wins: an older one answering later is dropped, and was aborted', async () => {
    const r = new Resource<string>()
    const old = deferred<string>()
    let oldSignal: AbortSignal | undefined
    const first = r.load((signal) => {
      oldSignal = signal
      return old.promise
    })
    await r.load(async () => 'new')
    expect(oldSignal?.aborted).toBe(true)
    old.resolve('old')
    await first
    expect(r.get()).toMatchObject({ data: 'new', loading: false })
  })

  it('merges a next page into what is there, and updates it after a change', async () => {
    const r = new Resource<number[]>()
    await r.load(async () => [1, 2])
    await r.load(async () => [3], (had, got) => [...(had ?? []), ...got])
    expect(r.get().data).toEqual([1, 2, 3])
    r.update((had) => had?.filter((x) => x !== 2))
    expect(r.get().data).toEqual([1, 3])
  })

  it('abort drops the read under way and is no longer loading', async () => {
    const r = new Resource<string>()
    const d = deferred<string>()
    const p = r.load(() => d.promise)
    r.abort()
    expect(r.get().loading).toBe(false)
    d.resolve('late')
    await p
    expect(r.get().data).toBeUndefined()
  })
})

describe('Action', () => {
  it('is busy while it runs, and says why it failed instead of throwing', async () => {
    const a = new Action()
    const d = deferred<void>()
    const p = a.run(() => d.promise)
    expect(a.get().busy).toBe(true)
    d.reject(new ApiError(409, 'already there'))
    expect(await p).toBe(false)
    expect(a.get()).toEqual({ busy: false, error: 'already there' })
    // The next run clears the error.
    expect(await a.run(async () => {})).toBe(true)
    expect(a.get()).toEqual({ busy: false, error: undefined })
  })

  it('says a failure in the view’s own words', async () => {
    const a = new Action((e) => (e instanceof ApiError && e.status === 401 ? 'That API key is not valid.' : 'other'))
    await a.run(async () => {
      throw new ApiError(401, 'unauthorized')
    })
    expect(a.get().error).toBe('That API key is not valid.')
    a.clear()
    expect(a.get().error).toBeUndefined()
  })
})
