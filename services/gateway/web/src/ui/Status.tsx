import { useApp } from '../store/app'

const LABEL: Record<string, string> = {
  connecting: 'Connecting…',
  open: 'Connected',
  reconnecting: 'Reconnecting…',
  offline: 'Offline',
  closed: 'Disconnected',
}

export function ConnectionBadge() {
  const status = useApp((s) => s.connection)
  const online = useApp((s) => s.online)
  const shown = !online ? 'offline' : status
  const color = shown === 'open' ? 'bg-emerald-500' : shown === 'offline' || shown === 'closed' ? 'bg-red-500' : 'bg-amber-500'
  return (
    <span className="flex items-center gap-1.5 text-xs text-slate-600 dark:text-slate-400" role="status" aria-live="polite" data-testid="connection" data-status={shown}>
      <span className={`inline-block h-2 w-2 rounded-full ${color}`} aria-hidden="true" />
      {LABEL[shown]}
      {(shown === 'reconnecting' || shown === 'closed') && (
        <button type="button" onClick={() => useApp.getState().reconnect()} className="focus-ring rounded px-1 underline">
          Retry now
        </button>
      )}
    </span>
  )
}
