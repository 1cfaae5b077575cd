import { lazy, memo, Suspense, useEffect, useState } from 'react'
import { api } from '../api'
import { spokenView, type ChatMessage, type SpokenView } from '../chat/model'
import { useApp } from '../store/app'
import { Notes, VoteBar } from '../improve/Feedback'
import { MessageComments } from './Comments'
import { DeliveredMark } from './Outbox'
import { AnswerDetails, MemoriesUsed, ReasoningSteps, ToolUseCard } from './Parts'
import { Waterfall } from '../timeline/Waterfall'
import { errorMeaning } from '../ui/errors'
import { IconChevronLeft, IconChevronRight, IconEdit, IconRefresh, IconArrowRight } from '../ui/Icons'

// The Markdown renderer loads with the first answer shown, not with the
// page: until then the answer shows as plain text.
const Markdown = lazy(() => import('./Markdown').then((m) => ({ default: m.Markdown })))

function Answer({ source }: { source: string }) {
  return (
    <Suspense fallback={<div className="whitespace-pre-wrap">{source}</div>}>
      <Markdown source={source} />
    </Suspense>
  )
}

// BranchNav moves between the versions of a message (‹ 2/3 ›): the siblings
// come from the server, and the branch through the chosen one replaces the
// one on screen.
function BranchNav({ m }: { m: ChatMessage }) {
  const showBranch = useApp((s) => s.showBranch)
  const [pos, setPos] = useState<{ ids: string[]; at: number } | null>(null)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string>()
  const count = pos?.ids.length ?? m.siblingCount
  const at = pos ? pos.at : undefined

  // Where this version stands among its siblings, once there are several
  // (a version shown after a move is a new component: it asks again).
  useEffect(() => {
    if (m.siblingCount <= 1 || m.local) return
    let live = true
    api.siblings(m.id).then(
      (s) => {
        const ids = s.siblings.map((x) => x.id)
        const here = ids.indexOf(m.id)
        if (live && here >= 0) setPos({ ids, at: here })
      },
      () => {},
    )
    return () => {
      live = false
    }
  }, [m.id, m.siblingCount, m.local])

  async function go(delta: number) {
    setBusy(true)
    setError(undefined)
    try {
      const s = await api.siblings(m.id)
      const ids = s.siblings.map((x) => x.id)
      const here = ids.indexOf(m.id)
      const next = Math.min(ids.length - 1, Math.max(0, here + delta))
      const target = ids[next]
      if (target && target !== m.id) {
        await showBranch(target)
        setPos({ ids, at: next })
      } else setPos({ ids, at: here })
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    } finally {
      setBusy(false)
    }
  }
  if (m.siblingCount <= 1 && !pos) return null
  return (
    <span className="flex items-center gap-0.5 text-xs text-slate-600 dark:text-slate-400" role="group" aria-label="Versions">
      <button type="button" aria-label="Previous version" disabled={busy} onClick={() => void go(-1)} className="focus-ring rounded p-0.5 hover:bg-slate-100 disabled:opacity-50 dark:hover:bg-slate-800">
        <IconChevronLeft />
      </button>
      <span aria-live="polite" data-testid="branch-position">
        {at !== undefined ? at + 1 : '·'}/{count}
      </span>
      <button type="button" aria-label="Next version" disabled={busy} onClick={() => void go(1)} className="focus-ring rounded p-0.5 hover:bg-slate-100 disabled:opacity-50 dark:hover:bg-slate-800">
        <IconChevronRight />
      </button>
      {error && <span role="alert" className="text-red-700">{error}</span>}
    </span>
  )
}

// SpokenAnswer shows a spoken answer: while it plays, the sentences heard so
// far, the one being heard marked, the rest still to come faded; once the
// user cut in, what they heard and, set apart, what was generated but never
// played.
function SpokenAnswer({ m, sv }: { m: ChatMessage; sv: SpokenView }) {
  if (sv.cut)
    return (
      <div className="space-y-2">
        {sv.heard ? <Answer source={sv.heard} /> : <p className="text-slate-500 italic">Nothing was heard.</p>}
        {sv.notHeard && (
          <div data-testid="not-heard" aria-label="Generated but not heard"
            className="rounded-lg border border-dashed border-slate-300 p-2 text-slate-500 dark:border-slate-700 dark:text-slate-400">
            <p className="text-xs font-medium tracking-wide uppercase">Not heard: you interrupted</p>
            <p className="whitespace-pre-wrap">{sv.notHeard}</p>
          </div>
        )}
      </div>
    )
  if (sv.sentences.every((x) => x.playout === 'played') && m.status !== 'streaming') return <Answer source={m.content} />
  return (
    <p className="whitespace-pre-wrap" data-testid="spoken-live">
      {sv.sentences.map((x, i) => (
        <span key={x.sequence} data-playout={x.playout}
          className={x.playout === 'playing' ? 'rounded bg-emerald-100 dark:bg-emerald-900' : x.playout === 'pending' ? 'text-slate-400 dark:text-slate-500' : ''}>
          {i > 0 && !x.text.startsWith('\n') ? ' ' : ''}{x.text}
        </span>
      ))}
    </p>
  )
}

export const MessageView = memo(function MessageView({ m, last, busy }: { m: ChatMessage; last: boolean; busy: boolean }) {
  const { regenerate, continueAnswer, edit } = useApp.getState()
  const [editing, setEditing] = useState(false)
  const [draft, setDraft] = useState(m.content)
  const streaming = m.status === 'streaming' || m.status === 'pending'
  const user = m.role === 'user'
  const sv = user ? undefined : spokenView(m)
  const conversationId = useApp((s) => s.chat?.conversationId)
  // A spoken answer shows where its time went; any other on request.
  const [timingOpen, setTimingOpen] = useState<boolean>()
  const open = timingOpen ?? (sv !== undefined && !streaming)
  const [detailsOpen, setDetailsOpen] = useState(false)
  const [commenting, setCommenting] = useState(false)
  const hasDetails = (m.promptVersions?.length ?? 0) > 0 || m.judgement !== undefined

  return (
    <article
      className={`group flex flex-col gap-1 ${user ? 'items-end' : 'items-start'}`}
      aria-label={user ? 'Your message' : 'Alicia\'s answer'}
      data-message-id={m.id}
      data-role={m.role}
      data-status={m.status}
    >
      {!user && m.reasoning && m.reasoning.length > 0 && (
        <div className="w-full max-w-3xl">
          <ReasoningSteps messageId={m.id} steps={m.reasoning} />
        </div>
      )}
      {!user && m.memoriesUsed && m.memoriesUsed.length > 0 && (
        <div className="w-full max-w-3xl">
          <MemoriesUsed messageId={m.id} uses={m.memoriesUsed} />
        </div>
      )}
      {!user && m.toolUses && m.toolUses.length > 0 && (
        <div className="w-full max-w-3xl space-y-1">
          {m.toolUses.map((t) => <ToolUseCard key={t.id} messageId={m.id} t={t} />)}
        </div>
      )}
      {editing ? (
        <form className="w-full max-w-3xl space-y-2" onSubmit={(e) => { e.preventDefault(); setEditing(false); if (draft.trim() && draft !== m.content) edit(m.id, draft) }}>
          <label htmlFor={`edit-${m.id}`} className="sr-only">Edit your message</label>
          <textarea id={`edit-${m.id}`} autoFocus value={draft} onChange={(e) => setDraft(e.target.value)} rows={3}
            className="focus-ring w-full rounded-lg border border-slate-300 bg-white p-2 dark:border-slate-700 dark:bg-slate-900"
            onKeyDown={(e) => e.key === 'Escape' && setEditing(false)} />
          <div className="flex justify-end gap-2">
            <button type="button" onClick={() => setEditing(false)} className="focus-ring rounded px-3 py-1 text-sm">Cancel</button>
            <button type="submit" className="focus-ring rounded bg-indigo-600 px-3 py-1 text-sm text-white">Send edit</button>
          </div>
        </form>
      ) : (
        <div
          className={
            user
              ? 'max-w-[85%] rounded-2xl rounded-br-sm bg-indigo-600 px-4 py-2 whitespace-pre-wrap text-white'
              : 'w-full max-w-3xl'
          }
        >
          {user ? (
            <>
              {m.voice && <span className="sr-only">Spoken: </span>}
              {m.content}
            </>
          ) : sv ? (
            <SpokenAnswer m={m} sv={sv} />
          ) : m.content ? (
            <Answer source={m.content} />
          ) : streaming ? (
            <span className="text-slate-500" aria-live="polite">Thinking…</span>
          ) : null}
          {!user && streaming && m.content && <span className="ml-0.5 inline-block h-4 w-2 animate-pulse bg-slate-400 align-middle" aria-hidden="true" />}
        </div>
      )}
      {m.interrupted && <p className="text-xs text-amber-700 dark:text-amber-400">{sv?.cut ? 'Interrupted' : 'Stopped'}</p>}
      {m.error && (
        <div role="alert" className="w-full max-w-3xl rounded-lg border border-red-300 bg-red-50 p-2 text-sm text-red-900 dark:border-red-800 dark:bg-red-950 dark:text-red-100">
          <p>
            <strong>Error {m.error.code}:</strong> {errorMeaning(m.error.code)}
          </p>
          <p className="text-xs opacity-80">{m.error.message}</p>
          {!user && m.error.recoverable && (
            <button type="button" onClick={() => regenerate(m.id)} className="focus-ring mt-1 rounded bg-red-700 px-2 py-0.5 text-xs text-white">
              Retry
            </button>
          )}
        </div>
      )}
      {!editing && !m.local && (
        <div className={`flex flex-wrap items-center gap-1 ${user ? 'justify-end' : ''}`}>
          <BranchNav m={m} />
          {/* While an answer streams these stay in place, disabled: the
              messages keep their layout (nothing above the answer moves or
              is painted again). */}
          {user && <DeliveredMark id={m.id} />}
          {user && (
            <button type="button" aria-label="Edit message" disabled={busy} onClick={() => { setDraft(m.content); setEditing(true) }}
              className="focus-ring rounded p-1 text-slate-600 hover:bg-slate-100 disabled:opacity-40 disabled:hover:bg-transparent dark:text-slate-400 dark:hover:bg-slate-800">
              <IconEdit />
            </button>
          )}
          {!user && !streaming && (
            <>
              <VoteBar messageId={m.id} votes={m.votes} label="this answer" />
              <button type="button" aria-label="Regenerate answer" disabled={busy} onClick={() => regenerate(m.id)}
                className="focus-ring rounded p-1 text-slate-600 hover:bg-slate-100 disabled:opacity-40 disabled:hover:bg-transparent dark:text-slate-400 dark:hover:bg-slate-800">
                <IconRefresh />
              </button>
              {last && (m.interrupted || m.status === 'completed') && (
                <button type="button" aria-label="Continue answer" disabled={busy} onClick={() => continueAnswer(m.id)}
                  className="focus-ring rounded p-1 text-slate-600 hover:bg-slate-100 disabled:opacity-40 disabled:hover:bg-transparent dark:text-slate-400 dark:hover:bg-slate-800">
                  <IconArrowRight />
                </button>
              )}
              <button type="button" aria-expanded={open} onClick={() => setTimingOpen(!open)}
                className="focus-ring rounded px-1.5 py-0.5 text-xs text-slate-600 hover:bg-slate-100 dark:text-slate-400 dark:hover:bg-slate-800">
                Timing
              </button>
              {hasDetails && (
                <button type="button" aria-expanded={detailsOpen} onClick={() => setDetailsOpen(!detailsOpen)}
                  className="focus-ring rounded px-1.5 py-0.5 text-xs text-slate-600 hover:bg-slate-100 dark:text-slate-400 dark:hover:bg-slate-800">
                  Details
                </button>
              )}
              <button type="button" aria-label="Copy answer" onClick={() => void navigator.clipboard?.writeText(m.content)}
                className="focus-ring rounded px-1.5 py-0.5 text-xs text-slate-600 hover:bg-slate-100 dark:text-slate-400 dark:hover:bg-slate-800">
                Copy
              </button>
            </>
          )}
          <Notes messageId={m.id} count={m.noteCount} />
          <button type="button" aria-expanded={commenting} onClick={() => setCommenting(!commenting)}
            className="focus-ring rounded px-1.5 py-0.5 text-xs text-slate-600 hover:bg-slate-100 dark:text-slate-400 dark:hover:bg-slate-800">
            Comment
          </button>
        </div>
      )}
      {!m.local && <MessageComments messageId={m.id} open={commenting} onClose={() => setCommenting(false)} />}
      {!user && detailsOpen && hasDetails && <AnswerDetails versions={m.promptVersions} judgement={m.judgement} />}
      {!user && open && conversationId && (
        <Waterfall conversationId={conversationId} answerId={m.id} live={`${m.status}:${m.spoken?.length ?? 0}`} />
      )}
    </article>
  )
})
