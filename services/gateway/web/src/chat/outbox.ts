// The outbox: messages written while offline, kept in IndexedDB so a
// reload keeps them, sent on reconnection in one SyncRequest (17) and
// settled by its SyncResponse (18): a synced message leaves the outbox (the
// server's copy takes its place in the conversation), a conflicting one
// stays, with what the person can do about it.
import { newId } from '../ids'
import type { SyncRequest, SyncResponse } from '../protocol'

export type OutboxStatus = 'waiting' | 'sending' | 'conflict'

export interface OutboxEntry {
  localId: string
  conversationId: string
  content: string
  // Milliseconds since the Unix epoch.
  createdAt: number
  // The client's order within the conversation.
  sequenceNumber: number
  // What the message followed on screen when written: the last message
  // shown, or the entry written before it.
  previousId?: string
  status: OutboxStatus
  // Why the server did not take it (SyncResponse conflict: reason, message).
  conflict?: { reason: string; message: string }
}

// OutboxStore keeps the entries (IndexedDB in the page, memory in tests).
export interface OutboxStore {
  all(): Promise<OutboxEntry[]>
  put(e: OutboxEntry): Promise<void>
  delete(localId: string): Promise<void>
}

export function memoryStore(): OutboxStore {
  const m = new Map<string, OutboxEntry>()
  return {
    all: async () => [...m.values()].map((e) => ({ ...e })),
    put: async (e) => void m.set(e.localId, { ...e }),
    delete: async (id) => void m.delete(id),
  }
}

// idbStore keeps the entries in the browser's IndexedDB (database
// alicia-outbox, store messages, keyed by localId).
export function idbStore(name = 'alicia-outbox'): OutboxStore {
  let db: Promise<IDBDatabase> | undefined
  const open = () =>
    (db ??= new Promise<IDBDatabase>((resolve, reject) => {
      const req = indexedDB.open(name, 1)
      req.onupgradeneeded = () => req.result.createObjectStore('messages', { keyPath: 'localId' })
      req.onsuccess = () => resolve(req.result)
      req.onerror = () => reject(req.error ?? new Error('IndexedDB unavailable'))
    }))
  const run = async <T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> => {
    const d = await open()
    return new Promise<T>((resolve, reject) => {
      const tx = d.transaction('messages', mode)
      const req = f(tx.objectStore('messages'))
      tx.oncomplete = () => resolve(req.result)
      tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'))
    })
  }
  return {
    all: () => run('readonly', (s) => s.getAll() as IDBRequest<OutboxEntry[]>),
    put: async (e) => void (await run('readwrite', (s) => s.put(e))),
    delete: async (id) => void (await run('readwrite', (s) => s.delete(id))),
  }
}

export class Outbox {
  private entries: OutboxEntry[] = []
  private listeners = new Set<() => void>()
  private loaded?: Promise<void>

  constructor(private readonly store: OutboxStore) {}

  // load reads the stored entries once (again after a reload).
  load(): Promise<void> {
    return (this.loaded ??= this.store.all().then(
      (all) => {
        // Anything "sending" when the page went away was not settled: send it again.
        this.entries = sortEntries(all.map((e) => (e.status === 'sending' ? { ...e, status: 'waiting' } : e)))
        this.changed()
      },
      () => undefined, // no IndexedDB (a private window): the outbox lives as long as the page
    ))
  }

  subscribe = (f: () => void): (() => void) => {
    this.listeners.add(f)
    return () => this.listeners.delete(f)
  }

  // snapshot is the entries, stable between changes (useSyncExternalStore).
  snapshot = (): readonly OutboxEntry[] => this.entries

  forConversation(cid: string): OutboxEntry[] {
    return this.entries.filter((e) => e.conversationId === cid)
  }

  // add keeps a message written offline; previousId is the last message
  // shown, used when the conversation has nothing waiting before it.
  async add(cid: string, content: string, previousId?: string, at = Date.now()): Promise<OutboxEntry> {
    const mine = this.forConversation(cid)
    const before = mine.at(-1)
    const e: OutboxEntry = {
      localId: newId('al'),
      conversationId: cid,
      content,
      createdAt: at,
      sequenceNumber: (before?.sequenceNumber ?? 0) + 1,
      previousId: before ? before.localId : previousId,
      status: 'waiting',
    }
    this.entries = sortEntries([...this.entries, e])
    this.changed()
    await this.save(e)
    return e
  }

  // syncRequest is the SyncRequest for a conversation's waiting messages
  // (undefined when none waits); they are marked sending.
  async syncRequest(cid: string): Promise<SyncRequest | undefined> {
    await this.load()
    const waiting = this.forConversation(cid).filter((e) => e.status === 'waiting')
    if (waiting.length === 0) return undefined
    this.update(waiting.map((e) => e.localId), (e) => ({ ...e, status: 'sending' }))
    return {
      messages: waiting.map((e) => ({
        localId: e.localId,
        sequenceNumber: e.sequenceNumber,
        previousId: e.previousId,
        role: 'user',
        contents: e.content,
        createdAt: e.createdAt,
      })),
    }
  }

  // settle applies a SyncResponse: synced messages leave, conflicts stay
  // with their reason.
  async settle(resp: SyncResponse): Promise<void> {
    for (const m of resp.syncedMessages) {
      if (m.status === 'synced') await this.remove(m.localId)
      else {
        const c = m.conflict ?? {}
        this.update([m.localId], (e) => ({
          ...e,
          status: 'conflict',
          conflict: { reason: String(c.reason ?? 'conflict'), message: String(c.message ?? 'The server did not take this message.') },
        }))
      }
    }
  }

  // unsent puts messages sent but not settled (the connection dropped
  // before the SyncResponse) back to waiting.
  unsent(cid: string): void {
    const ids = this.forConversation(cid).filter((e) => e.status === 'sending').map((e) => e.localId)
    if (ids.length > 0) this.update(ids, (e) => ({ ...e, status: 'waiting' }))
  }

  // retryAsNew sends a conflicting message again as a new message at the
  // end of the conversation.
  retryAsNew(localId: string): void {
    const old = this.entries.find((e) => e.localId === localId)
    if (!old) return
    void this.remove(localId)
    const e: OutboxEntry = { ...old, localId: newId('al'), previousId: undefined, status: 'waiting', conflict: undefined }
    this.entries = sortEntries([...this.entries, e])
    this.changed()
    void this.save(e)
  }

  async remove(localId: string): Promise<void> {
    if (!this.entries.some((e) => e.localId === localId)) return
    this.entries = this.entries.filter((e) => e.localId !== localId)
    this.changed()
    await this.store.delete(localId).catch(() => undefined)
  }

  private update(ids: string[], f: (e: OutboxEntry) => OutboxEntry): void {
    const set = new Set(ids)
    this.entries = this.entries.map((e) => {
      if (!set.has(e.localId)) return e
      const n = f(e)
      void this.save(n)
      return n
    })
    this.changed()
  }

  private async save(e: OutboxEntry): Promise<void> {
    await this.store.put(e).catch(() => undefined)
  }

  private changed(): void {
    for (const f of this.listeners) f()
  }
}

function sortEntries(es: OutboxEntry[]): OutboxEntry[] {
  return [...es].sort((a, b) => a.createdAt - b.createdAt || a.sequenceNumber - b.sequenceNumber)
}

// The page's outbox.
export const outbox = new Outbox(typeof indexedDB === 'undefined' ? memoryStore() : idbStore())
