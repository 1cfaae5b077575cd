// The service worker, built to /sw.js by the precache plugin in
// vite.config.ts, which puts the build's file list and a hash of their
// contents where __ALICIA_PRECACHE__ stands. It keeps the app shell
// (index.html, the hashed assets, the icons and the manifest) so that the
// page loads without the network; the API, the WebSocket, the probes and
// the metrics are never intercepted (sw-route.ts).
import { RESERVED, strategy } from './sw-route'

// The few service worker types used (the app's lib is the DOM's, not the
// WebWorker's).
interface ExtendableEvent extends Event {
  waitUntil(p: Promise<unknown>): void
}
interface FetchEvent extends ExtendableEvent {
  readonly request: Request
  respondWith(r: Promise<Response>): void
}
interface InstallEvent extends ExtendableEvent {
  // The static routing API (Chromium): requests that never reach the worker.
  addRoutes?(rules: { condition: { urlPattern: string }; source: 'network' }[]): Promise<void>
}
interface Scope {
  readonly location: Location
  readonly clients: { claim(): Promise<void> }
  skipWaiting(): Promise<void>
  addEventListener(type: 'install', fn: (e: InstallEvent) => void): void
  addEventListener(type: 'activate', fn: (e: ExtendableEvent) => void): void
  addEventListener(type: 'fetch', fn: (e: FetchEvent) => void): void
}

const sw = self as unknown as Scope
const { version, urls } = (globalThis as unknown as { __ALICIA_PRECACHE__: { version: string; urls: string[] } }).__ALICIA_PRECACHE__
const CACHE = `alicia-${version}`

sw.addEventListener('install', (e) => {
  // Where the browser can, the gateway's own paths do not even wake the
  // worker (no fetch event, no added latency); elsewhere the fetch handler
  // lets them through.
  let bypass: Promise<void> | undefined
  try {
    bypass = e.addRoutes?.(RESERVED.flatMap((p) => [p, `${p}/*`]).map((urlPattern) => ({ condition: { urlPattern }, source: 'network' as const })))
  } catch {
    // not supported as written: the fetch handler still lets them through
  }
  // no-cache: revalidated (a 304 for what the browser has), never a stale index.html.
  e.waitUntil(
    Promise.resolve(bypass)
      .catch(() => {})
      .then(() => caches.open(CACHE))
      .then((c) => c.addAll(urls.map((u) => new Request(u, { cache: 'no-cache' }))))
      .then(() => sw.skipWaiting()),
  )
})

sw.addEventListener('activate', (e) => {
  e.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => sw.clients.claim()),
  )
})

sw.addEventListener('fetch', (e) => {
  const req = e.request
  const how = strategy({ method: req.method, url: req.url, mode: req.mode, range: req.headers.has('range') }, sw.location.origin)
  if (how === 'network') return
  e.respondWith(how === 'navigate' ? navigate(req) : cacheFirst(req, how === 'asset'))
})

async function navigate(req: Request): Promise<Response> {
  try {
    return await fetch(req)
  } catch (err) {
    const shell = await caches.match('/index.html', { cacheName: CACHE, ignoreVary: true })
    if (shell) return shell
    throw err
  }
}

async function cacheFirst(req: Request, keep: boolean): Promise<Response> {
  const cache = await caches.open(CACHE)
  const hit = await cache.match(req, { ignoreVary: true })
  if (hit) return hit
  const res = await fetch(req)
  if (keep && res.ok) await cache.put(req, res.clone())
  return res
}
