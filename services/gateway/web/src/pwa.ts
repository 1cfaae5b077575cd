// Installable web app: the service worker (/sw.js, built from sw.ts) is
// registered in production builds only (the dev server has no sw.js) and
// only in a secure context, where browsers allow one (HTTPS, or localhost).
// Registered after the load event, so it never competes with the page's
// own first requests.

export interface PwaEnv {
  prod: boolean
  secure: boolean
  container: Pick<ServiceWorkerContainer, 'register'> | undefined
}

// How long after the load event the service worker is registered.
export const REGISTER_DELAY_MS = 2000

export function shouldRegister(env: PwaEnv): boolean {
  return env.prod && env.secure && env.container !== undefined
}

export function registerServiceWorker(
  env: PwaEnv = { prod: import.meta.env.PROD, secure: window.isSecureContext, container: navigator.serviceWorker },
): void {
  if (!shouldRegister(env)) return
  const register = () => void env.container?.register('/sw.js', { scope: '/' }).catch(() => {})
  // Installing fetches the whole shell (the voice code too): well after the
  // page is up, when the browser is idle, so a first visit's load never
  // waits behind it (it cost a cold load ~100–250 ms on a 2-CPU machine).
  const later = () => setTimeout(() => (window.requestIdleCallback ?? ((f: () => void) => f()))(register), REGISTER_DELAY_MS)
  if (document.readyState === 'complete') later()
  else window.addEventListener('load', later, { once: true })
}

// After the browser comes back online, a session check that failed for
// want of the network (the page was opened offline and shows the sign-in
// screen with api.ts's "offline: …" notice) is worth making again.
export function recheckSession(session: unknown, sessionError: string | undefined): boolean {
  return session === null && sessionError !== undefined && sessionError.startsWith('offline')
}
