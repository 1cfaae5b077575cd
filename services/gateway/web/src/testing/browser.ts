// What the page's modules need of a browser, for vitest's node environment:
// a window (the router listens to popstate on it), location and history
// (navigate), and fetch answered by the test (FakeServer). Import it first
// in a test file: it installs itself when imported.
type Handler = (req: { method: string; path: string; body: unknown }) => { status: number; body?: unknown } | Promise<{ status: number; body?: unknown }>

class FakeLocation {
  protocol = 'http:'
  host = 'page.test'
  pathname = '/'
  search = ''
  set(url: string) {
    const u = new URL(url, 'http://page.test')
    this.pathname = u.pathname
    this.search = u.search
  }
}

export const fakeLocation = new FakeLocation()

const g = globalThis as Record<string, unknown>
if (typeof g.window === 'undefined') g.window = new EventTarget()
g.location = fakeLocation
g.history = {
  pushState: (_: unknown, __: string, url: string) => fakeLocation.set(url),
  replaceState: (_: unknown, __: string, url: string) => fakeLocation.set(url),
}

// FakeServer answers the page's REST requests: each route is "METHOD
// /path" (the path without its query) and a handler; what was asked is kept
// in requests. Unrouted requests are 404s.
export class FakeServer {
  requests: { method: string; path: string; query: URLSearchParams; body: unknown }[] = []
  private routes = new Map<string, Handler>()

  constructor() {
    g.fetch = async (input: string, init?: RequestInit) => {
      const u = new URL(input, 'http://page.test')
      const method = init?.method ?? 'GET'
      const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined
      this.requests.push({ method, path: u.pathname, query: u.searchParams, body })
      if (init?.signal?.aborted) throw new DOMException('aborted', 'AbortError')
      const h = this.routes.get(`${method} ${u.pathname}`)
      const res = h ? await h({ method, path: u.pathname, body }) : { status: 404, body: { error: { message: 'not found' } } }
      if (init?.signal?.aborted) throw new DOMException('aborted', 'AbortError')
      return new Response(res.status === 204 || res.body === undefined ? null : JSON.stringify(res.body), { status: res.status })
    }
  }

  on(route: string, h: Handler | { status: number; body?: unknown }): this {
    this.routes.set(route, typeof h === 'function' ? h : () => h)
    return this
  }
}

// FakeSocket stands in for the browser's WebSocket (installed as the
// global): each one made is kept in FakeSocket.made, and the test opens or
// drops it.
export class FakeSocket {
  static CONNECTING = 0
  static OPEN = 1
  static CLOSING = 2
  static CLOSED = 3
  static made: FakeSocket[] = []
  readyState = FakeSocket.CONNECTING
  binaryType = 'blob'
  sent: Uint8Array[] = []
  onopen: (() => void) | null = null
  onmessage: ((e: { data: ArrayBuffer }) => void) | null = null
  onclose: ((e: { code: number; reason: string }) => void) | null = null
  onerror: (() => void) | null = null
  constructor(readonly url: string) {
    FakeSocket.made.push(this)
  }
  open() {
    this.readyState = FakeSocket.OPEN
    this.onopen?.()
  }
  send(data: Uint8Array) {
    this.sent.push(data)
  }
  close() {
    this.readyState = FakeSocket.CLOSED
  }
}
g.WebSocket = FakeSocket
