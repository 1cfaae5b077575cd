import { lazy, Suspense, useEffect, useState } from 'react'
import { onUnauthorized } from '../api'
import { navigate, useRoute } from '../router'
import { useApp } from '../store/app'
import { ChatView } from '../components/ChatView'
import { IconClose, IconMenu } from '../ui/Icons'
import { Sidebar } from '../conversations/Sidebar'
import { SignIn } from '../session/SignIn'
import { OfflineOutbox } from '../components/Outbox'
import { TimerToasts } from '../timers/Timers'

// Screens other than the conversation load when first opened.
const Memories = lazy(() => import('../memories/Memories').then((m) => ({ default: m.Memories })))
const Settings = lazy(() => import('../settings/Settings').then((m) => ({ default: m.Settings })))
const Optimize = lazy(() => import('../optimize/Optimize').then((m) => ({ default: m.Optimize })))
const Timeline = lazy(() => import('../timeline/Timeline').then((m) => ({ default: m.Timeline })))

export function App() {
  const session = useApp((s) => s.session)
  const sessionError = useApp((s) => s.sessionError)
  const online = useApp((s) => s.online)
  const route = useRoute()
  const [menu, setMenu] = useState(false)

  useEffect(() => {
    void useApp.getState().loadSession()
    return onUnauthorized(() => useApp.getState().expired())
  }, [])

  useEffect(() => {
    if (session && route.name === 'signin') navigate('/', true)
  }, [session, route.name])

  useEffect(() => {
    if (route.name !== 'conversation' && useApp.getState().chat) useApp.getState().closeConversation()
  }, [route.name])

  if (session === undefined) return <p className="p-6 text-slate-500">Loading…</p>
  // Opened offline (the service worker's shell): the session cannot be
  // checked, which is no reason to ask for the key again.
  if (session === null && sessionError && !online)
    return (
      <main className="m-auto max-w-md p-6 text-center">
        <img src="/favicon.svg" alt="" width={48} height={48} className="mx-auto" />
        <h1 className="mt-3 text-xl font-semibold">You are offline</h1>
        <p className="mt-2 text-slate-600 dark:text-slate-400">Alicia cannot be reached without the network. This page comes back by itself when you are online again.</p>
        <button type="button" onClick={() => void useApp.getState().loadSession()} className="focus-ring mt-4 rounded-lg bg-indigo-600 px-4 py-2 text-white">Try again</button>
        <OfflineOutbox />
      </main>
    )
  if (session === null) return <SignIn />

  let main
  switch (route.name) {
    case 'conversation':
      main = <ChatView id={route.id} focusId={route.message} />
      break
    case 'timeline':
      main = <Timeline id={route.id} />
      break
    case 'memories':
      main = <Memories focusId={route.id} />
      break
    case 'settings':
      main = <Settings />
      break
    case 'optimize':
      main = <Optimize />
      break
    case 'notfound':
      main = (
        <section className="m-auto p-6 text-center">
          <h1 className="text-xl font-semibold">Page not found</h1>
        </section>
      )
      break
    default:
      main = <ChatView />
  }

  return (
    <div className="flex h-dvh">
      <a href="#main" className="sr-only focus:not-sr-only focus:absolute focus:z-50 focus:bg-white focus:p-2">Skip to content</a>
      <aside className="hidden w-72 shrink-0 border-r border-slate-200 md:block dark:border-slate-800">
        <Sidebar />
      </aside>
      {menu && (
        <div className="fixed inset-0 z-30 flex md:hidden" role="dialog" aria-modal="true" aria-label="Menu">
          <div className="flex w-72 max-w-[85%] flex-col bg-white shadow-xl dark:bg-slate-950">
            <div className="flex justify-end p-2">
              <button type="button" aria-label="Close menu" onClick={() => setMenu(false)} className="focus-ring rounded p-1"><IconClose /></button>
            </div>
            {/* The sidebar takes what the close button leaves: its foot (sign out) stays on screen. */}
            <div className="min-h-0 flex-1">
              <Sidebar onNavigate={() => setMenu(false)} />
            </div>
          </div>
          <button type="button" aria-label="Close menu" className="flex-1 bg-black/40" onClick={() => setMenu(false)} />
        </div>
      )}
      <main id="main" className="flex min-w-0 flex-1 flex-col">
        <div className="flex items-center border-b border-slate-200 p-2 md:hidden dark:border-slate-800">
          <button type="button" aria-label="Open menu" onClick={() => setMenu(true)} className="focus-ring rounded p-1"><IconMenu /></button>
          <span className="ml-2 font-semibold">Alicia</span>
        </div>
        <Suspense fallback={<p className="p-6 text-slate-500">Loading…</p>}>{main}</Suspense>
      </main>
      <TimerToasts />
    </div>
  )
}
