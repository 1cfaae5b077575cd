// The person's comments (Commentary, PROTOCOL.md 15): under a message, and
// on the whole conversation from its header. Sent over the WebSocket; the
// server keeps them with their author and GET /v1/conversations/{id}
// returns them.
import { useState, type FormEvent } from 'react'
import { useApp } from '../store/app'
import type { Commentary } from '../types'

const none: Commentary[] = []

function useComments(messageId: string | undefined): Commentary[] {
  const all = useApp((s) => s.chat?.commentaries ?? none)
  return messageId ? all.filter((c) => c.messageId === messageId) : all.filter((c) => c.commentaryType === 'conversation' || !c.messageId)
}

function CommentForm({ id, label, onDone }: { id: string; label: string; onDone: () => void }) {
  const [text, setText] = useState('')
  const submit = (e: FormEvent) => {
    e.preventDefault()
    if (!text.trim()) return
    useApp.getState().comment(id === 'conversation' ? undefined : id, text)
    setText('')
    onDone()
  }
  return (
    <form onSubmit={submit} className="flex w-full max-w-3xl flex-wrap items-end gap-2">
      <label htmlFor={`comment-${id}`} className="sr-only">{label}</label>
      <textarea id={`comment-${id}`} autoFocus rows={2} maxLength={4000} value={text} onChange={(e) => setText(e.target.value)} placeholder={label}
        onKeyDown={(e) => e.key === 'Escape' && onDone()}
        className="focus-ring min-w-0 flex-1 rounded-lg border border-slate-300 bg-white p-2 text-sm dark:border-slate-700 dark:bg-slate-900" />
      <div className="flex gap-1">
        <button type="button" onClick={onDone} className="focus-ring rounded px-2 py-1 text-sm">Cancel</button>
        <button type="submit" disabled={!text.trim()} className="focus-ring rounded bg-indigo-600 px-2 py-1 text-sm text-white disabled:opacity-50">Save comment</button>
      </div>
    </form>
  )
}

function CommentList({ comments, label }: { comments: Commentary[]; label: string }) {
  if (comments.length === 0) return null
  return (
    <ul aria-label={label} className="w-full max-w-3xl space-y-1">
      {comments.map((c) => (
        <li key={c.id} data-commentary-id={c.id} className="rounded-lg border-l-4 border-amber-400 bg-amber-50 px-2 py-1 text-sm text-amber-950 dark:bg-amber-950 dark:text-amber-100">
          <span className="sr-only">Your comment: </span>{c.content}
        </li>
      ))}
    </ul>
  )
}

// MessageComments: a message's comments and its Comment action.
export function MessageComments({ messageId, open, onClose }: { messageId: string; open: boolean; onClose: () => void }) {
  const comments = useComments(messageId)
  return (
    <>
      <CommentList comments={comments} label="Comments on this message" />
      {open && <CommentForm id={messageId} label="Comment on this message" onDone={onClose} />}
    </>
  )
}

// ConversationComments: the header's Comment button, and the comments on
// the whole conversation under the header.
export function ConversationComments() {
  const [open, setOpen] = useState(false)
  const comments = useComments(undefined)
  const hasMessages = useApp((s) => (s.chat?.order.length ?? 0) > 0)
  if (!hasMessages) return null
  return (
    <div className="mx-auto w-full max-w-3xl space-y-1 px-3 pt-2">
      <CommentList comments={comments} label="Comments on this conversation" />
      {open ? (
        <CommentForm id="conversation" label="Comment on this conversation" onDone={() => setOpen(false)} />
      ) : (
        <button type="button" onClick={() => setOpen(true)} aria-expanded={false}
          className="focus-ring rounded px-1.5 py-0.5 text-xs text-slate-600 hover:bg-slate-100 dark:text-slate-400 dark:hover:bg-slate-800">
          Comment on conversation
        </button>
      )}
    </div>
  )
}
