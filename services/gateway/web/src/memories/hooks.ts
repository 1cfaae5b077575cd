// The memory manager's reads and changes (GET/POST/PATCH/DELETE
// /v1/memories…), on the one hook pattern of src/ui/hooks.ts.
import { api } from '../api'
import type { Memory, MemoryPage, MemoryUse } from '../types'
import { useResource } from '../ui/hooks'

export interface MemoryFields {
  content: string
  tags: string[]
  importance: number
  pinned?: boolean
}

// tagsOf reads the comma-separated tags of the form.
export function tagsOf(s: string): string[] {
  return s.split(',').map((t) => t.trim()).filter(Boolean)
}

// replaced puts a changed memory in place, and takes an archived one away
// unless archived ones are shown.
export function replaced(list: Memory[], m: Memory, showArchived: boolean): Memory[] {
  return list.map((x) => (x.id === m.id ? m : x)).filter((x) => showArchived || !x.archived)
}

const appendPage = (had: MemoryPage | undefined, got: MemoryPage): MemoryPage => ({ ...got, memories: [...(had?.memories ?? []), ...got.memories] })

// useMemories: the person's memories, by meaning when query is set (the
// best 20), else the newest 50 a page; read again when either changes.
export function useMemories(query: string, archived: boolean) {
  const ask = (cursor?: string, signal?: AbortSignal) => api.listMemories({ q: query || undefined, archived, cursor, limit: query ? 20 : 50 }, signal)
  const list = useResource<MemoryPage>(JSON.stringify([query, archived]), (signal) => ask(undefined, signal))
  const set = (fn: (ms: Memory[]) => Memory[]) => list.update((had) => ({ ...had, memories: fn(had?.memories ?? []) }))
  const change = async (p: Promise<Memory>) => {
    const m = await p
    set((ms) => replaced(ms, m, archived))
  }
  const cursor = list.data?.nextCursor
  return {
    memories: list.data?.memories ?? [],
    cursor,
    loading: list.loading,
    error: list.error,
    // Whether the first read is over (the add form opens by itself for
    // someone with none).
    loaded: list.data !== undefined || list.error !== undefined,
    loadMore: () => (cursor ? list.more((signal) => ask(cursor, signal), appendPage) : Promise.resolve()),
    add: async (v: MemoryFields) => {
      const m = await api.createMemory(v)
      set((ms) => [m, ...ms])
    },
    edit: (id: string, v: MemoryFields) => change(api.patchMemory(id, { content: v.content, tags: v.tags, importance: v.importance })),
    pin: (id: string) => change(api.pinMemory(id)),
    archive: (id: string) => change(api.archiveMemory(id)),
    rate: (id: string, rating: number) => change(api.rateMemory(id, rating)),
    remove: async (id: string) => {
      await api.deleteMemory(id)
      set((ms) => ms.filter((x) => x.id !== id))
    },
  }
}

export type Memories = ReturnType<typeof useMemories>

// useMemoryUses: the answers that used memory id, newest first, a page at a
// time.
export function useMemoryUses(id: string) {
  const r = useResource<{ uses: MemoryUse[]; nextCursor?: string }>(id, () => api.memoryUses(id))
  const cursor = r.data?.nextCursor
  return {
    uses: r.data?.uses,
    cursor,
    error: r.error,
    loadMore: () =>
      cursor ? r.more(() => api.memoryUses(id, cursor), (had, got) => ({ ...got, uses: [...(had?.uses ?? []), ...got.uses] })) : Promise.resolve(),
  }
}
