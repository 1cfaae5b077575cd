import { startTransition, useEffect, useLayoutEffect, useRef, useState, useSyncExternalStore, type FormEvent, type KeyboardEvent } from 'react'
import { useVirtualizer } from '@tanstack/react-virtual'
import { LiveChat, type ChatSource } from '../chat/live'
import { streamingAnswer, visible, type LastCall } from '../chat/model'
import { ChatTail } from '../chat/tail'
import { href, navigate } from '../router'
import { useApp } from '../store/app'
import { errorMeaning } from '../ui/errors'
import { IconSend, IconStop } from '../ui/Icons'
import { ConversationComments } from './Comments'
import { MessageView } from './MessageView'
import { OutboxList } from './Outbox'
import { ConnectionBadge } from '../ui/Status'
import { MicButton, VoicePanel } from '../voice/Voice'

function Composer({ busy }: { busy: boolean }) {
  const { send, stop } = useApp.getState()
  // The text box is not controlled: the key press that sends clears it
  // itself instead of rendering the composer on the way (src/chat/live.ts).
  const [hasText, setHasText] = useState(false)
  const [error, setError] = useState<string>()
  const ref = useRef<HTMLTextAreaElement>(null)

  async function submit(e?: FormEvent) {
    e?.preventDefault()
    const box = ref.current
    if (!box) return
    const t = box.value.trim()
    // The newest state, not the one React shows: an answer may have started.
    const latest = useApp.getState().chat
    // Offline, an answer cut off mid-stream does not hold the composer.
    if (!t || (latest && streamingAnswer(latest) && useApp.getState().online)) return
    box.value = ''
    startTransition(() => {
      setHasText(false)
      setError(undefined)
    })
    try {
      await send(t)
    } catch (err) {
      box.value = t
      setHasText(true)
      setError(err instanceof Error ? err.message : String(err))
    }
    box.focus()
  }
  function onKey(e: KeyboardEvent<HTMLTextAreaElement>) {
    if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault()
      void submit()
    }
  }
  return (
    <form onSubmit={submit} className="border-t border-slate-200 p-3 dark:border-slate-800">
      <VoicePanel />
      {error && <p role="alert" className="mb-2 text-sm text-red-700 dark:text-red-400">{error}</p>}
      <div className="mx-auto flex max-w-3xl items-end gap-2">
        <label htmlFor="composer" className="sr-only">Message Alicia</label>
        <textarea
          id="composer"
          ref={ref}
          rows={1}
          onChange={(e) => setHasText(e.target.value.trim() !== '')}
          onKeyDown={onKey}
          placeholder="Message Alicia"
          className="focus-ring max-h-48 min-h-[2.75rem] flex-1 resize-y rounded-xl border border-slate-300 bg-white px-3 py-2.5 dark:border-slate-700 dark:bg-slate-900"
        />
        <MicButton />
        {busy ? (
          <button type="button" onClick={stop} aria-label="Stop the answer" className="focus-ring flex h-11 items-center gap-1 rounded-xl bg-slate-800 px-3 text-white dark:bg-slate-200 dark:text-slate-900">
            <IconStop /> <span className="hidden sm:inline">Stop</span>
          </button>
        ) : (
          <button type="submit" aria-label="Send" disabled={!hasText} className="focus-ring flex h-11 items-center gap-1 rounded-xl bg-indigo-600 px-3 text-white disabled:opacity-50">
            <IconSend /> <span className="hidden sm:inline">Send</span>
          </button>
        )}
      </div>
    </form>
  )
}

export function MessageList({ live, focusId }: { live: LiveChat; focusId?: string }) {
  const chat = useSyncExternalStore(live.subscribe, live.getShown)
  const messages = chat ? visible(chat) : []
  const busy = chat ? streamingAnswer(chat) !== undefined : false
  const scroller = useRef<HTMLDivElement>(null)
  const tailBox = useRef<HTMLDivElement>(null)
  const stick = useRef(true)
  const lastTop = useRef(0)
  const v = useVirtualizer({
    count: messages.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => 96,
    overscan: 8,
    getItemKey: (i) => messages[i]?.id ?? i,
    // A scroll (the tail's own scroll to the end after a sent message, a
    // reader's) re-renders the list in React's next task, not inside the
    // browser's scroll step before the paint: a synchronous render there
    // would hold the answer's frame behind it.
    useFlushSync: false,
  })
  const lastContent = messages.at(-1)?.content.length ?? 0

  // The newest rows React does not show yet are drawn by the tail, after
  // the virtual list (src/chat/live.ts); each commit takes away those it
  // now shows, in the same task.
  useLayoutEffect(() => {
    if (!tailBox.current || !scroller.current) return
    const tail = new ChatTail(tailBox.current, scroller.current, () => stick.current)
    live.mountTail(tail)
    return () => live.unmountTail(tail)
  }, [live])
  useLayoutEffect(() => live.syncTail())

  // Follow the conversation while the reader is at its end.
  useLayoutEffect(() => {
    if (stick.current && messages.length > 0) v.scrollToIndex(messages.length - 1, { align: 'end' })
  }, [messages.length, lastContent, v])

  useEffect(() => {
    if (!focusId) return
    const i = messages.findIndex((m) => m.id === focusId)
    if (i >= 0) {
      stick.current = false
      v.scrollToIndex(i, { align: 'center' })
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [focusId, messages.length > 0])

  return (
    <div
      ref={scroller}
      className="flex-1 overflow-y-auto"
      onScroll={(e) => {
        // At the end, the list follows; it stops following only when the
        // reader scrolls up. A scroll event comes a frame after the scroll:
        // rows added in between (the tail's, a fast answer's) must not make
        // the page's own scroll to the end look like the reader leaving it.
        const el = e.currentTarget
        const top = el.scrollTop
        if (el.scrollHeight - top - el.clientHeight < 80) stick.current = true
        else if (top < lastTop.current) stick.current = false
        lastTop.current = top
      }}
      role="log"
      aria-live="polite"
      aria-relevant="additions"
      aria-label="Messages"
    >
      <div className="relative mx-auto max-w-3xl px-3" style={{ height: v.getTotalSize() }}>
        {v.getVirtualItems().map((item) => {
          const m = messages[item.index]
          if (!m) return null
          return (
            <div key={item.key} data-index={item.index} ref={v.measureElement} className="absolute top-0 left-0 w-full px-3 py-3" style={{ transform: `translateY(${item.start}px)` }}>
              <MessageView m={m} last={item.index === messages.length - 1} busy={busy} />
            </div>
          )
        })}
      </div>
      {/* The tail's: React renders it without children and never touches them. */}
      <div ref={tailBox} className="mx-auto max-w-3xl" />
    </div>
  )
}

// The store's chat, as the view's LiveChat reads it.
const appChat: ChatSource = {
  get: () => useApp.getState().chat,
  subscribe: (onChange) => useApp.subscribe((s, prev) => {
    if (s.chat !== prev.chat) onChange()
  }),
}

// LastCallLine tells what the conversation's last voice call amounted to.
function LastCallLine({ call }: { call: LastCall }) {
  const min = Math.floor(call.durationMs / 60000)
  const sec = Math.round((call.durationMs % 60000) / 1000)
  const n = (k: number, one: string, many: string) => `${k} ${k === 1 ? one : many}`
  return (
    <p data-testid="last-call" className="border-b border-slate-200 px-4 py-1 text-xs text-slate-600 dark:border-slate-800 dark:text-slate-400">
      Last call: {min > 0 ? `${min} min ${sec} s` : `${sec} s`} · {n(call.messageCount, 'message', 'messages')} · {n(call.toolCallCount, 'tool call', 'tool calls')} · {n(call.memoriesUsed, 'memory used', 'memories used')}
    </p>
  )
}

export function ChatView({ id, focusId }: { id?: string; focusId?: string }) {
  const [live] = useState(() => new LiveChat(appChat))
  const chat = useSyncExternalStore(live.subscribe, live.getShown)
  const chatLoad = useApp((s) => s.chatLoad)
  const chatError = useApp((s) => s.chatError)
  const { openConversation, dismissError } = useApp.getState()

  useEffect(() => {
    if (id) void openConversation(id)
  }, [id, openConversation])

  const busy = chat ? streamingAnswer(chat) !== undefined : false
  if (id && chatLoad === 'forbidden')
    return (
      <section className="m-auto max-w-md p-6 text-center" aria-labelledby="nope">
        <h1 id="nope" className="text-xl font-semibold">This conversation is not yours</h1>
        <p className="mt-2 text-slate-600 dark:text-slate-400">It belongs to another user. Nothing of it is shown.</p>
      </section>
    )
  if (id && chatLoad === 'missing')
    return (
      <section className="m-auto max-w-md p-6 text-center" aria-labelledby="gone">
        <h1 id="gone" className="text-xl font-semibold">Conversation not found</h1>
        <p className="mt-2 text-slate-600 dark:text-slate-400">It may have been deleted.</p>
      </section>
    )
  return (
    <section className="flex h-full min-h-0 flex-1 flex-col" aria-label="Conversation">
      <header className="flex items-center justify-between gap-2 border-b border-slate-200 px-4 py-2 dark:border-slate-800">
        <h1 className="truncate text-base font-semibold">{chat?.title || (id ? 'Conversation' : 'New conversation')}</h1>
        <div className="flex items-center gap-2">
          {chat?.status === 'archived' && <span className="rounded bg-slate-200 px-2 py-0.5 text-xs dark:bg-slate-800">Archived</span>}
          {id && (
            <a href={href({ name: 'timeline', id })} onClick={(e) => { e.preventDefault(); navigate({ name: 'timeline', id }) }}
              className="focus-ring rounded px-1 text-sm text-indigo-700 underline dark:text-indigo-300">Timeline</a>
          )}
          {id && <ConnectionBadge />}
        </div>
      </header>
      {chat?.lastCall && <LastCallLine call={chat.lastCall} />}
      {id && <ConversationComments />}
      {chatLoad === 'error' && (
        <p role="alert" className="m-3 rounded bg-red-50 p-2 text-sm text-red-900 dark:bg-red-950 dark:text-red-100">
          The conversation could not be loaded: {chatError}
        </p>
      )}
      {chat && chat.errors.length > 0 && (
        <div className="mx-auto w-full max-w-3xl space-y-1 px-3 pt-2">
          {chat.errors.map((e) => (
            <div key={e.id} role="alert" className="flex items-start justify-between gap-2 rounded-lg border border-red-300 bg-red-50 p-2 text-sm text-red-900 dark:border-red-800 dark:bg-red-950 dark:text-red-100">
              <span><strong>Error {e.code}:</strong> {errorMeaning(e.code)} <span className="opacity-80">{e.message}</span></span>
              <button type="button" aria-label="Dismiss error" onClick={() => dismissError(e.id)} className="focus-ring rounded px-1">✕</button>
            </div>
          ))}
        </div>
      )}
      {!id || (chat && chat.order.length === 0 && chatLoad === 'ready') ? (
        <div className="flex flex-1 flex-col items-center justify-center gap-2 p-6 text-center">
          <img src="/favicon.svg" alt="" width={48} height={48} />
          <h2 className="text-xl font-semibold">How can I help?</h2>
          <p className="max-w-md text-slate-600 dark:text-slate-400">Type a message below, or press Voice and talk. Answers stream in as they are written; every tool call and memory used is shown.</p>
        </div>
      ) : (
        <MessageList live={live} focusId={focusId} />
      )}
      {chatLoad === 'loading' && <p className="p-3 text-center text-sm text-slate-500">Loading…</p>}
      {id && <OutboxList conversationId={id} />}
      <Composer busy={busy} />
    </section>
  )
}
