// Messages written offline (src/chat/outbox.ts), shown at the end of their
// conversation until the server has them, and the delivery mark of a sent
// message (its Acknowledgement came).
import { useEffect, useSyncExternalStore } from 'react'
import { delivered } from '../chat/offline'
import { outbox, type OutboxEntry } from '../chat/outbox'
import { useApp } from '../store/app'

function useOutbox(): readonly OutboxEntry[] {
  useEffect(() => void outbox.load(), [])
  return useSyncExternalStore(outbox.subscribe, outbox.snapshot)
}

const STATUS: Record<OutboxEntry['status'], string> = {
  waiting: 'Waiting to be sent',
  sending: 'Sending…',
  conflict: 'Not sent',
}

function Entry({ e }: { e: OutboxEntry }) {
  return (
    <li className="flex flex-col items-end gap-1" aria-label="Message waiting to be sent">
      <div className="max-w-[85%] rounded-2xl rounded-br-sm border border-dashed border-indigo-400 bg-indigo-50 px-4 py-2 whitespace-pre-wrap text-slate-900 dark:bg-indigo-950 dark:text-slate-100">
        {e.content}
      </div>
      <p className={`text-xs ${e.status === 'conflict' ? 'text-red-700 dark:text-red-400' : 'text-slate-600 dark:text-slate-400'}`} data-outbox-status={e.status}>
        {STATUS[e.status]}
        {e.conflict && <>: {e.conflict.message}</>}
      </p>
      {e.status === 'conflict' && (
        <div className="flex gap-2">
          <button type="button" onClick={() => { outbox.retryAsNew(e.localId); useApp.getState().reconnect() }}
            className="focus-ring rounded bg-indigo-600 px-2 py-0.5 text-xs text-white">Send as a new message</button>
          <button type="button" onClick={() => void outbox.remove(e.localId)}
            className="focus-ring rounded border border-slate-300 px-2 py-0.5 text-xs dark:border-slate-700">Discard</button>
        </div>
      )}
    </li>
  )
}

// OutboxList is the conversation's messages waiting to be sent.
export function OutboxList({ conversationId }: { conversationId: string }) {
  const entries = useOutbox().filter((e) => e.conversationId === conversationId)
  if (entries.length === 0) return null
  return (
    <section aria-label="Written offline" className="mx-auto w-full max-w-3xl px-4 pb-2">
      <ul className="flex flex-col gap-3">
        {entries.map((e) => <Entry key={e.localId} e={e} />)}
      </ul>
    </section>
  )
}

// OfflineOutbox is every message waiting to be sent, for the page opened
// offline (the conversation cannot be read then).
export function OfflineOutbox() {
  const entries = useOutbox()
  if (entries.length === 0) return null
  return (
    <section aria-label="Written offline" className="mt-6 text-left">
      <h2 className="text-sm font-semibold text-slate-700 dark:text-slate-300">
        {entries.length === 1 ? '1 message waits' : `${entries.length} messages wait`} to be sent when you are back online
      </h2>
      <ul className="mt-2 flex flex-col gap-3">
        {entries.map((e) => <Entry key={e.localId} e={e} />)}
      </ul>
    </section>
  )
}

// DeliveredMark is the check mark of a message the server has stored.
export function DeliveredMark({ id }: { id: string }) {
  useSyncExternalStore(delivered.subscribe, delivered.snapshot)
  if (!delivered.has(id)) return null
  return (
    <span className="text-xs text-slate-500" title="Delivered" aria-label="Delivered">
      ✓
    </span>
  )
}
