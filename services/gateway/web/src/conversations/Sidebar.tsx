// The sidebar: new conversation, the list (filtered by title, active or
// archived, paged as it scrolls) with each row's rename, archive and
// delete, and the links to memories, Improve Alicia, settings and signing out.
import { memo, useEffect, useRef, useState } from 'react'
import { useShallow } from 'zustand/react/shallow'
import { useApp } from '../store/app'
import { href, navigate, useRoute } from '../router'
import type { Conversation } from '../types'
import { useAction } from '../ui/hooks'
import { IconPlus } from '../ui/Icons'
import { TimersPanel } from '../timers/Timers'

// A row re-renders only when its conversation or whether it is open
// changes: a message sent moves one conversation to the top, and the
// others stay as they are.
const ConversationRow = memo(function ConversationRow({ c, active }: { c: Conversation; active: boolean }) {
  const rename = useApp((s) => s.renameConversation)
  const archive = useApp((s) => s.archiveConversation)
  const remove = useApp((s) => s.deleteConversation)
  const [editing, setEditing] = useState(false)
  const [title, setTitle] = useState(c.title)
  const [menu, setMenu] = useState(false)
  const { run, error } = useAction()
  const actions = useRef<HTMLButtonElement>(null)
  const label = c.title || 'New conversation'

  if (editing) {
    return (
      <li className="px-2 py-1">
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setEditing(false)
            if (title.trim() && title !== c.title) void run(() => rename(c.id, title.trim()))
          }}
        >
          <label className="sr-only" htmlFor={`rename-${c.id}`}>
            New title for {label}
          </label>
          <input
            id={`rename-${c.id}`}
            autoFocus
            maxLength={200}
            className="focus-ring w-full rounded border border-slate-300 bg-white px-2 py-1 text-sm dark:border-slate-700 dark:bg-slate-900"
            value={title}
            onChange={(e) => setTitle(e.target.value)}
            onBlur={() => setEditing(false)}
            onKeyDown={(e) => e.key === 'Escape' && setEditing(false)}
          />
        </form>
      </li>
    )
  }
  return (
    <li className={`group relative rounded-lg ${active ? 'bg-indigo-100 dark:bg-indigo-900/50' : 'hover:bg-slate-100 dark:hover:bg-slate-800'}`}>
      <a
        href={href({ name: 'conversation', id: c.id })}
        aria-current={active ? 'page' : undefined}
        className="focus-ring block truncate rounded-lg py-2 pr-9 pl-3 text-sm"
        onClick={(e) => {
          e.preventDefault()
          navigate({ name: 'conversation', id: c.id })
        }}
      >
        {label}
      </a>
      <button
        ref={actions}
        type="button"
        aria-label={`Actions for ${label}`}
        aria-haspopup="menu"
        aria-expanded={menu}
        className="focus-ring absolute top-1 right-1 rounded px-2 py-1 text-slate-600 hover:bg-slate-200 dark:text-slate-300 dark:hover:bg-slate-700"
        onClick={() => setMenu((m) => !m)}
      >
        ⋯
      </button>
      {menu && (
        <div role="menu" className="absolute top-8 right-1 z-20 w-40 rounded-lg border border-slate-200 bg-white py-1 shadow-lg dark:border-slate-700 dark:bg-slate-900" onKeyDown={(e) => {
          if (e.key !== 'Escape') return
          setMenu(false)
          actions.current?.focus() // back where the menu was opened from
        }}>
          <button role="menuitem" autoFocus className="focus-ring block w-full px-3 py-1.5 text-left text-sm hover:bg-slate-100 dark:hover:bg-slate-800" onClick={() => { setMenu(false); setTitle(c.title); setEditing(true) }}>
            Rename
          </button>
          <button role="menuitem" className="focus-ring block w-full px-3 py-1.5 text-left text-sm hover:bg-slate-100 dark:hover:bg-slate-800" onClick={() => { setMenu(false); void run(() => archive(c.id, c.status !== 'archived')) }}>
            {c.status === 'archived' ? 'Unarchive' : 'Archive'}
          </button>
          <button
            role="menuitem"
            className="focus-ring block w-full px-3 py-1.5 text-left text-sm text-red-700 hover:bg-red-50 dark:text-red-400 dark:hover:bg-red-950"
            onClick={() => {
              setMenu(false)
              if (confirm(`Delete "${label}"? This cannot be undone.`)) void run(() => remove(c.id))
            }}
          >
            Delete
          </button>
        </div>
      )}
      {error && (
        <p role="alert" className="px-3 pb-1 text-xs text-red-700 dark:text-red-400">
          {error}
        </p>
      )}
    </li>
  )
})

export function Sidebar({ onNavigate }: { onNavigate?: () => void }) {
  const route = useRoute()
  // Only what the sidebar shows: an answer streaming into the open
  // conversation does not render it again.
  const { conversations, nextCursor, listLoading, listError, filter, listStatus, session } = useApp(
    useShallow((s) => ({ conversations: s.conversations, nextCursor: s.nextCursor, listLoading: s.listLoading, listError: s.listError,
      filter: s.filter, listStatus: s.listStatus, session: s.session })),
  )
  const { loadConversations, setFilter, setListStatus, startNew, signOut } = useApp.getState()
  const [q, setQ] = useState(filter)
  const sentinel = useRef<HTMLDivElement>(null)

  useEffect(() => {
    void loadConversations(true)
  }, [loadConversations])

  useEffect(() => {
    const t = setTimeout(() => q !== filter && setFilter(q), 250)
    return () => clearTimeout(t)
  }, [q, filter, setFilter])

  // Paging: the next page loads when the end of the list scrolls into view.
  useEffect(() => {
    const el = sentinel.current
    if (!el || !nextCursor) return
    const io = new IntersectionObserver((es) => es.some((e) => e.isIntersecting) && void loadConversations(false))
    io.observe(el)
    return () => io.disconnect()
  }, [nextCursor, loadConversations])

  const activeId = route.name === 'conversation' ? route.id : undefined
  return (
    <nav aria-label="Conversations" className="flex h-full flex-col gap-2 p-3" onClick={(e) => (e.target as HTMLElement).closest('a') && onNavigate?.()}>
      <button
        type="button"
        onClick={() => {
          startNew()
          onNavigate?.()
        }}
        className="focus-ring flex items-center justify-center gap-2 rounded-lg bg-indigo-600 px-3 py-2 font-medium text-white hover:bg-indigo-700"
      >
        <IconPlus /> New conversation
      </button>
      <div>
        <label htmlFor="conv-filter" className="sr-only">
          Filter conversations by title
        </label>
        <input
          id="conv-filter"
          type="search"
          placeholder="Filter by title"
          value={q}
          onChange={(e) => setQ(e.target.value)}
          className="focus-ring w-full rounded-lg border border-slate-300 bg-white px-3 py-1.5 text-sm dark:border-slate-700 dark:bg-slate-900"
        />
      </div>
      <div role="tablist" aria-label="Which conversations" className="flex gap-1 text-sm">
        {(['active', 'archived'] as const).map((st) => (
          <button
            key={st}
            role="tab"
            aria-selected={listStatus === st}
            onClick={() => setListStatus(st)}
            className={`focus-ring flex-1 rounded-md px-2 py-1 ${listStatus === st ? 'bg-slate-200 font-medium dark:bg-slate-800' : 'text-slate-600 dark:text-slate-400'}`}
          >
            {st === 'active' ? 'Active' : 'Archived'}
          </button>
        ))}
      </div>
      <ul className="-mx-1 flex-1 space-y-0.5 overflow-y-auto px-1" aria-busy={listLoading}>
        {conversations.map((c) => (
          <ConversationRow key={c.id} c={c} active={c.id === activeId} />
        ))}
        {!listLoading && conversations.length === 0 && <li className="px-3 py-2 text-sm text-slate-600 dark:text-slate-400">{filter ? 'No conversation matches.' : 'No conversations yet.'}</li>}
        {listError && (
          <li role="alert" className="px-3 py-2 text-sm text-red-700 dark:text-red-400">
            {listError}
          </li>
        )}
        <div ref={sentinel} aria-hidden="true" className="h-2" />
        {listLoading && <li className="px-3 py-2 text-sm text-slate-500">Loading…</li>}
      </ul>
      <div className="space-y-1 border-t border-slate-200 pt-2 text-sm dark:border-slate-800">
        <TimersPanel />
        <a href="/memories" onClick={(e) => { e.preventDefault(); navigate('/memories') }} aria-current={route.name === 'memories' ? 'page' : undefined} className="focus-ring block rounded-lg px-3 py-1.5 hover:bg-slate-100 dark:hover:bg-slate-800">
          Memories
        </a>
        <a href="/improve" onClick={(e) => { e.preventDefault(); navigate('/improve') }} aria-current={route.name === 'optimize' ? 'page' : undefined} className="focus-ring block rounded-lg px-3 py-1.5 hover:bg-slate-100 dark:hover:bg-slate-800">
          Improve Alicia
        </a>
        <a href="/settings" onClick={(e) => { e.preventDefault(); navigate('/settings') }} aria-current={route.name === 'settings' ? 'page' : undefined} className="focus-ring block rounded-lg px-3 py-1.5 hover:bg-slate-100 dark:hover:bg-slate-800">
          Settings and status
        </a>
        <div className="flex items-center justify-between px-3 py-1.5 text-slate-600 dark:text-slate-400">
          <span className="truncate" title={session?.user}>
            {session?.user}
            {session?.admin ? ' (admin)' : ''}
          </span>
          <button type="button" onClick={() => void signOut()} className="focus-ring rounded px-2 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800">
            Sign out
          </button>
        </div>
      </div>
    </nav>
  )
}
