// The memory manager: what Alicia remembers about the person, searched by
// meaning, added, edited, pinned, archived, deleted, and the answers that
// used each memory.
import { useState, type FormEvent } from 'react'
import { navigate } from '../router'
import type { Memory } from '../types'
import { useAction } from '../ui/hooks'
import { tagsOf, useMemories, useMemoryUses, type MemoryFields, type Memories as MemoryList } from './hooks'

function MemoryForm({ initial, submitLabel, onSubmit, onCancel }: {
  initial?: Memory
  submitLabel: string
  onSubmit: (m: MemoryFields) => Promise<void>
  onCancel?: () => void
}) {
  const [content, setContent] = useState(initial?.content ?? '')
  const [tags, setTags] = useState(initial?.tags.join(', ') ?? '')
  const [importance, setImportance] = useState(initial?.importance ?? 0.5)
  const [pinned, setPinned] = useState(false)
  const { run, busy, error } = useAction()
  const pfx = initial ? `m-${initial.id}` : 'new-memory'

  async function submit(e: FormEvent) {
    e.preventDefault()
    const done = await run(() => onSubmit({ content: content.trim(), tags: tagsOf(tags), importance, pinned: initial ? undefined : pinned }))
    if (done && !initial) {
      setContent('')
      setTags('')
      setImportance(0.5)
      setPinned(false)
    }
  }
  return (
    <form onSubmit={submit} className="space-y-2 rounded-lg border border-slate-200 p-3 dark:border-slate-800">
      <div>
        <label htmlFor={`${pfx}-content`} className="block text-sm font-medium">Memory</label>
        <textarea id={`${pfx}-content`} required maxLength={4000} rows={2} value={content} onChange={(e) => setContent(e.target.value)}
          className="focus-ring w-full rounded border border-slate-300 bg-white p-2 dark:border-slate-700 dark:bg-slate-900" />
      </div>
      <div className="flex flex-wrap gap-3">
        <div className="min-w-40 flex-1">
          <label htmlFor={`${pfx}-tags`} className="block text-sm font-medium">Tags (comma-separated)</label>
          <input id={`${pfx}-tags`} value={tags} onChange={(e) => setTags(e.target.value)}
            className="focus-ring w-full rounded border border-slate-300 bg-white px-2 py-1 dark:border-slate-700 dark:bg-slate-900" />
        </div>
        <div>
          <label htmlFor={`${pfx}-importance`} className="block text-sm font-medium">Importance: {importance.toFixed(1)}</label>
          <input id={`${pfx}-importance`} type="range" min={0} max={1} step={0.1} value={importance} onChange={(e) => setImportance(Number(e.target.value))} className="focus-ring" />
        </div>
        {!initial && (
          <label className="flex items-center gap-1 self-end text-sm">
            <input type="checkbox" checked={pinned} onChange={(e) => setPinned(e.target.checked)} className="focus-ring" /> Pinned
          </label>
        )}
      </div>
      {error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{error}</p>}
      <div className="flex gap-2">
        <button type="submit" disabled={busy || !content.trim()} className="focus-ring rounded bg-indigo-600 px-3 py-1 text-sm text-white disabled:opacity-50">{submitLabel}</button>
        {onCancel && <button type="button" onClick={onCancel} className="focus-ring rounded px-3 py-1 text-sm">Cancel</button>}
      </div>
    </form>
  )
}

function Uses({ id }: { id: string }) {
  const { uses, cursor, error, loadMore } = useMemoryUses(id)
  if (error) return <p role="alert" className="text-sm text-red-700">{error}</p>
  if (!uses) return <p className="text-sm text-slate-500">Loading…</p>
  if (uses.length === 0) return <p className="text-sm text-slate-500">No answer has used this memory yet.</p>
  return (
    <ul className="space-y-1 text-sm" aria-label="Answers that used this memory">
      {uses.map((u) => (
        <li key={u.messageId}>
          <a href={`/c/${encodeURIComponent(u.conversationId)}?m=${encodeURIComponent(u.messageId)}`}
            onClick={(e) => { e.preventDefault(); navigate({ name: 'conversation', id: u.conversationId, message: u.messageId }) }}
            className="focus-ring text-indigo-700 underline dark:text-indigo-300">
            {u.conversationTitle || 'Conversation'}
          </a>{' '}
          <span className="text-slate-600 dark:text-slate-400">— {u.excerpt}</span>{' '}
          <span className="text-xs text-slate-500">({Math.round(u.similarity * 100)}%)</span>
        </li>
      ))}
      {cursor && <li><button type="button" onClick={() => void loadMore()} className="focus-ring text-xs underline">More</button></li>}
    </ul>
  )
}

// Stars: the person's 1..5 rating of a memory, five radio buttons (arrow
// keys move and rate, as any radio group). Search puts a better-rated
// memory first among equally close ones.
function Stars({ m, list }: { m: Memory; list: MemoryList }) {
  const { run, busy, error } = useAction()
  const rating = m.userRating ?? 0
  return (
    // Never disabled while a rating is saved: a disabled radio would lose
    // the keyboard's focus.
    <fieldset className="flex items-center gap-1 text-sm" data-testid="memory-rating" aria-busy={busy}>
      <legend className="sr-only">How useful is this memory? {rating ? `Rated ${rating} of 5` : 'Not rated'}</legend>
      <span aria-hidden="true" className="text-xs text-slate-600 dark:text-slate-400">Useful:</span>
      {[1, 2, 3, 4, 5].map((n) => (
        <label key={n} className="cursor-pointer">
          <input type="radio" name={`rating-${m.id}`} value={n} checked={rating === n} onChange={() => void run(() => list.rate(m.id, n))}
            className="peer sr-only" />
          <span aria-hidden="true"
            className={`rounded px-0.5 text-lg leading-none peer-focus-visible:outline-2 peer-focus-visible:outline-offset-1 peer-focus-visible:outline-indigo-600 ${n <= rating ? 'text-amber-500' : 'text-slate-300 dark:text-slate-600'}`}>
            {n <= rating ? '★' : '☆'}
          </span>
          <span className="sr-only">{n} {n === 1 ? 'star' : 'stars'}</span>
        </label>
      ))}
      {error && <span role="alert" className="text-xs text-red-700 dark:text-red-400">{error}</span>}
    </fieldset>
  )
}

// Origin: who made the memory, and for an extracted one the conversation
// it came from.
function Origin({ m }: { m: Memory }) {
  const info = m.sourceInfo as { conversationId?: string; messageIds?: string[] } | undefined
  if (m.createdBy !== 'extraction') return null
  const cid = info?.conversationId
  const message = info?.messageIds?.[0]
  return (
    <span className="text-slate-600 dark:text-slate-400">
      · learned from{' '}
      {cid ? (
        <a href={`/c/${encodeURIComponent(cid)}${message ? `?m=${encodeURIComponent(message)}` : ''}`}
          onClick={(e) => { e.preventDefault(); navigate({ name: 'conversation', id: cid, message }) }}
          className="focus-ring text-indigo-700 underline dark:text-indigo-300">a conversation</a>
      ) : 'a conversation'}
    </span>
  )
}

function MemoryRow({ m, open, list }: { m: Memory; open: boolean; list: MemoryList }) {
  const [editing, setEditing] = useState(false)
  const [showUses, setShowUses] = useState(open)
  const { run, error } = useAction()
  if (editing)
    return (
      <li>
        <MemoryForm initial={m} submitLabel="Save" onCancel={() => setEditing(false)}
          onSubmit={async (v) => { await list.edit(m.id, v); setEditing(false) }} />
      </li>
    )
  return (
    <li className={`space-y-1 rounded-lg border p-3 ${open ? 'border-indigo-400' : 'border-slate-200 dark:border-slate-800'}`} data-memory-id={m.id}>
      <p className="whitespace-pre-wrap">{m.content}</p>
      <div className="flex flex-wrap items-center gap-1 text-xs">
        {m.pinned && <span className="rounded bg-indigo-100 px-1.5 py-0.5 text-indigo-900 dark:bg-indigo-900 dark:text-indigo-100">Pinned</span>}
        {m.archived && <span className="rounded bg-slate-200 px-1.5 py-0.5 dark:bg-slate-800">Archived</span>}
        {m.tags.map((t) => <span key={t} className="rounded bg-slate-100 px-1.5 py-0.5 dark:bg-slate-800">#{t}</span>)}
        <span className="text-slate-600 dark:text-slate-400">importance {m.importance.toFixed(1)}</span>
        {m.similarity !== undefined && <span className="text-slate-600 dark:text-slate-400">· {Math.round(m.similarity * 100)}% match</span>}
        <Origin m={m} />
      </div>
      <Stars m={m} list={list} />
      <div className="flex flex-wrap gap-1 text-sm">
        <button type="button" onClick={() => setEditing(true)} className="focus-ring rounded px-2 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800">Edit</button>
        {!m.pinned && <button type="button" onClick={() => void run(() => list.pin(m.id))} className="focus-ring rounded px-2 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800">Pin</button>}
        {!m.archived && <button type="button" onClick={() => void run(() => list.archive(m.id))} className="focus-ring rounded px-2 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800">Archive</button>}
        <button type="button" onClick={() => { if (confirm('Delete this memory?')) void run(() => list.remove(m.id)) }}
          className="focus-ring rounded px-2 py-0.5 text-red-700 hover:bg-red-50 dark:text-red-400 dark:hover:bg-red-950">Delete</button>
        <button type="button" aria-expanded={showUses} onClick={() => setShowUses(!showUses)} className="focus-ring rounded px-2 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800">Used by…</button>
      </div>
      {showUses && <Uses id={m.id} />}
      {error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{error}</p>}
    </li>
  )
}

export function Memories({ focusId }: { focusId?: string }) {
  const [q, setQ] = useState('')
  const [query, setQuery] = useState('')
  const [archived, setArchived] = useState(false)
  const list = useMemories(query, archived)
  const { memories, cursor, loading, error, loaded } = list
  // The add form opens by itself for someone with no memories yet, once
  // the list says so; after that it is the person's to open or close (a
  // reload of the list never snaps it shut under their typing).
  const [addOpen, setAddOpen] = useState<boolean>()

  return (
    <section className="mx-auto w-full max-w-3xl space-y-4 overflow-y-auto p-4" aria-labelledby="memories-title">
      <h1 id="memories-title" className="text-xl font-semibold">Memories</h1>
      <p className="text-sm text-slate-600 dark:text-slate-400">What Alicia remembers about you. Answers show which memories they used. Rate a memory&apos;s usefulness: among memories that match a question equally well, better-rated ones are used first.</p>
      <form role="search" className="flex flex-wrap gap-2" onSubmit={(e) => { e.preventDefault(); setQuery(q.trim()) }}>
        <label htmlFor="memory-search" className="sr-only">Search memories by meaning</label>
        <input id="memory-search" type="search" value={q} onChange={(e) => { setQ(e.target.value); if (!e.target.value) setQuery('') }} placeholder="Search by meaning"
          className="focus-ring min-w-0 flex-1 rounded-lg border border-slate-300 bg-white px-3 py-1.5 dark:border-slate-700 dark:bg-slate-900" />
        <button type="submit" className="focus-ring rounded-lg bg-slate-800 px-3 py-1.5 text-white dark:bg-slate-200 dark:text-slate-900">Search</button>
        <label className="flex items-center gap-1 text-sm">
          <input type="checkbox" checked={archived} onChange={(e) => setArchived(e.target.checked)} className="focus-ring" /> Include archived
        </label>
      </form>
      <details className="rounded-lg border border-slate-200 dark:border-slate-800" open={addOpen ?? (loaded && memories.length === 0 && !query)}
        onToggle={(e) => setAddOpen(e.currentTarget.open)}>
        <summary className="focus-ring cursor-pointer rounded-lg px-3 py-2 font-medium">Add a memory</summary>
        <div className="p-2">
          <MemoryForm submitLabel="Add memory" onSubmit={list.add} />
        </div>
      </details>
      {error && <p role="alert" className="text-sm text-red-700 dark:text-red-400">{error}</p>}
      <ul className="space-y-2" aria-label={query ? `Memories matching ${query}` : 'Your memories'} aria-busy={loading}>
        {memories.map((m) => (
          <MemoryRow key={m.id} m={m} open={m.id === focusId} list={list} />
        ))}
        {!loading && memories.length === 0 && <li className="text-sm text-slate-500">{query ? 'No memory matches.' : 'No memories yet.'}</li>}
      </ul>
      {focusId && !memories.some((m) => m.id === focusId) && !loading && (
        <div className="rounded-lg border border-indigo-400 p-3">
          <h2 className="mb-1 text-sm font-medium">Answers that used this memory</h2>
          <Uses id={focusId} />
        </div>
      )}
      {cursor && !query && <button type="button" onClick={() => void list.loadMore()} className="focus-ring rounded px-3 py-1 text-sm underline">Load more</button>}
    </section>
  )
}
