// What the service worker (sw.ts) does with a request; pure, so that
// pwa.test.ts can check it. Kept apart from pwa.ts: only sw.ts imports it,
// so the build inlines it into sw.js instead of sharing a chunk with the
// page.

// Paths the gateway owns (as webui.Options.Reserved in run.go): the REST
// API, the WebSocket and the session under /v1, the probes and the metrics.
// The service worker never answers or caches them.
export const RESERVED = ['/v1', '/healthz', '/readyz', '/metrics']

// network: not intercepted (the browser fetches it as if there were no
// service worker); navigate: the network, else the cached index.html when
// it fails (offline); asset: a content-hashed file, from the cache, else
// the network and then cached; cached: from the cache when precached, else
// the network, not stored.
export type Strategy = 'network' | 'navigate' | 'asset' | 'cached'

export interface RequestFacts {
  method: string
  url: string
  mode: string // Request.mode: 'navigate' for a page load
  range: boolean // a Range header (media): left to the network
}

export function isReserved(pathname: string): boolean {
  let p = pathname
  try {
    p = decodeURIComponent(pathname) // the gateway routes on the decoded path
  } catch {
    // a malformed escape: match the raw path
  }
  return RESERVED.some((r) => p === r || p.startsWith(r + '/'))
}

export function strategy(req: RequestFacts, origin: string): Strategy {
  if (req.method !== 'GET' || req.range) return 'network'
  const url = new URL(req.url)
  if (url.origin !== origin || isReserved(url.pathname) || url.pathname === '/sw.js') return 'network'
  // A client route (no extension) is index.html; a file keeps its own
  // answer, as the gateway's fallback does.
  const last = url.pathname.slice(url.pathname.lastIndexOf('/') + 1)
  if (req.mode === 'navigate' && !last.includes('.')) return 'navigate'
  if (url.pathname.startsWith('/assets/')) return 'asset'
  return 'cached'
}
