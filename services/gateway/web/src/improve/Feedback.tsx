import { useState } from 'react'
import type { NoteCategory, VoteTarget, Votes } from '../types'
import { IconDown, IconNote, IconUp } from '../ui/Icons'
import { useNotes, useVotes } from './hooks'

const REASONS: Record<'up' | 'down', string[]> = {
  up: ['Accurate', 'Helpful', 'Well explained'],
  down: ['Wrong', 'Not helpful', 'Too long', 'Unsafe'],
}

// Votes on an answer or one of its parts (tool use, memory use, reasoning
// step): the counts shown are the server's answer to the vote.
export function VoteBar({
  messageId, targetType = 'message', targetId, votes, label,
}: { messageId: string; targetType?: VoteTarget; targetId?: string; votes?: Votes; label: string }) {
  const { votes: v, vote, error } = useVotes(messageId, targetType, targetId, votes)
  const [reasons, setReasons] = useState<'up' | 'down' | null>(null)

  function press(value: 'up' | 'down') {
    if (v.userVote === value) {
      setReasons(null)
      void vote('remove')
      return
    }
    void vote(value)
    setReasons(value)
  }

  return (
    <div className="flex flex-wrap items-center gap-1 text-xs text-slate-600 dark:text-slate-400">
      <button type="button" aria-label={`Vote up ${label}`} aria-pressed={v.userVote === 'up'} onClick={() => press('up')}
        className={`focus-ring flex items-center gap-0.5 rounded px-1.5 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800 ${v.userVote === 'up' ? 'text-emerald-700 dark:text-emerald-400' : ''}`}>
        <IconUp />
        <span data-testid="upvotes">{v.upvotes}</span>
      </button>
      <button type="button" aria-label={`Vote down ${label}`} aria-pressed={v.userVote === 'down'} onClick={() => press('down')}
        className={`focus-ring flex items-center gap-0.5 rounded px-1.5 py-0.5 hover:bg-slate-100 dark:hover:bg-slate-800 ${v.userVote === 'down' ? 'text-red-700 dark:text-red-400' : ''}`}>
        <IconDown />
        <span data-testid="downvotes">{v.downvotes}</span>
      </button>
      {reasons && (
        <span role="group" aria-label="Why?" className="flex flex-wrap gap-1">
          {REASONS[reasons].map((r) => (
            <button key={r} type="button" className="focus-ring rounded-full border border-slate-300 px-2 py-0.5 hover:bg-slate-100 dark:border-slate-700 dark:hover:bg-slate-800"
              onClick={() => { setReasons(null); void vote(reasons, r) }}>
              {r}
            </button>
          ))}
        </span>
      )}
      {error && <span role="alert" className="text-red-700 dark:text-red-400">{error}</span>}
    </div>
  )
}

const CATEGORIES: NoteCategory[] = ['general', 'correction', 'improvement', 'context']

export function Notes({ messageId, count }: { messageId: string; count?: number }) {
  const [open, setOpen] = useState(false)
  const { notes, error, add, remove } = useNotes(messageId, open)
  const [content, setContent] = useState('')
  const [category, setCategory] = useState<NoteCategory>('general')
  const n = notes?.length ?? count ?? 0

  return (
    <div className="text-xs">
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)}
        className="focus-ring flex items-center gap-1 rounded px-1.5 py-0.5 text-slate-600 hover:bg-slate-100 dark:text-slate-400 dark:hover:bg-slate-800">
        <IconNote /> Notes{n > 0 ? ` (${n})` : ''}
      </button>
      {open && (
        <div className="mt-1 space-y-2 rounded-lg border border-slate-200 p-2 dark:border-slate-800">
          <ul className="space-y-1" aria-label="Notes">
            {(notes ?? []).map((note) => (
              <li key={note.id} className="flex items-start justify-between gap-2">
                <span><span className="font-medium">{note.category}:</span> {note.content}</span>
                <button type="button" aria-label="Delete note" className="focus-ring rounded px-1 text-slate-500 hover:text-red-700"
                  onClick={() => void remove(note.id)}>
                  ✕
                </button>
              </li>
            ))}
            {notes && notes.length === 0 && <li className="text-slate-500">No notes yet.</li>}
          </ul>
          <form className="flex flex-wrap gap-1" onSubmit={async (e) => {
            e.preventDefault()
            if (!content.trim()) return
            if (await add(content.trim(), category)) setContent('')
          }}>
            <label className="sr-only" htmlFor={`note-${messageId}`}>Note</label>
            <input id={`note-${messageId}`} value={content} maxLength={4000} onChange={(e) => setContent(e.target.value)} placeholder="Add a note"
              className="focus-ring min-w-0 flex-1 rounded border border-slate-300 bg-white px-2 py-1 dark:border-slate-700 dark:bg-slate-900" />
            <label className="sr-only" htmlFor={`note-cat-${messageId}`}>Category</label>
            <select id={`note-cat-${messageId}`} value={category} onChange={(e) => setCategory(e.target.value as NoteCategory)}
              className="focus-ring rounded border border-slate-300 bg-white px-1 dark:border-slate-700 dark:bg-slate-900">
              {CATEGORIES.map((c) => <option key={c} value={c}>{c}</option>)}
            </select>
            <button type="submit" className="focus-ring rounded bg-slate-800 px-2 py-1 text-white dark:bg-slate-200 dark:text-slate-900">Add</button>
          </form>
          {error && <p role="alert" className="text-red-700 dark:text-red-400">{error}</p>}
        </div>
      )}
    </div>
  )
}
