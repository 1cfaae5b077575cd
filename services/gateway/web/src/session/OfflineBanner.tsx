// "Offline", shown over every screen while the browser has no network (the
// conversation's header has its own indicator, ConnectionBadge, so not
// there). Mounted by main.tsx next to <App/>. Back online, a session check
// that failed offline is made again, so a page opened offline (the
// service worker's cached shell) reaches the signed-in screens by itself.
import { useEffect } from 'react'
import { recheckSession } from '../pwa'
import { useRoute } from '../router'
import { useApp } from '../store/app'

export function OfflineBanner() {
  const online = useApp((s) => s.online)
  const route = useRoute()

  useEffect(() => {
    if (!online) return
    const { session, sessionError, loadSession } = useApp.getState()
    if (recheckSession(session, sessionError)) void loadSession()
  }, [online])

  // The live region stays in the page, so that its change is announced.
  const shown = !online && route.name !== 'conversation'
  return (
    <div role="status" data-testid="offline" className="pointer-events-none fixed top-[max(0.5rem,env(safe-area-inset-top))] right-3 z-40">
      {shown && (
        <span className="flex items-center gap-1.5 rounded-full bg-red-700 px-3 py-1 text-sm font-medium text-white shadow">
          <span className="inline-block h-2 w-2 rounded-full bg-white" aria-hidden="true" />
          Offline
        </span>
      )}
    </div>
  )
}
