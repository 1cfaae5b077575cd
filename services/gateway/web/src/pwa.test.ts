import { describe, expect, it } from 'vitest'
import { recheckSession, shouldRegister } from './pwa'
import { RESERVED, strategy, type RequestFacts } from './sw-route'

const origin = 'https://alicia.example'
const get = (path: string, mode = 'cors'): RequestFacts => ({ method: 'GET', url: origin + path, mode, range: false })

describe('shouldRegister', () => {
  const container = { register: () => Promise.reject(new Error('not in tests')) }
  it('only in a production build, in a secure context, with service workers', () => {
    expect(shouldRegister({ prod: true, secure: true, container })).toBe(true)
    expect(shouldRegister({ prod: false, secure: true, container })).toBe(false)
    expect(shouldRegister({ prod: true, secure: false, container })).toBe(false)
    expect(shouldRegister({ prod: true, secure: true, container: undefined })).toBe(false)
  })
})

describe('recheckSession', () => {
  it('after a session check that failed offline only', () => {
    expect(recheckSession(null, 'offline: the server cannot be reached')).toBe(true)
    expect(recheckSession(null, undefined)).toBe(false) // signed out
    expect(recheckSession(null, 'Your session has ended. Sign in again.')).toBe(false)
    expect(recheckSession({ user: 'alice' }, undefined)).toBe(false)
    expect(recheckSession(undefined, undefined)).toBe(false)
  })
})

describe('service worker strategy', () => {
  it('never intercepts the API, the WebSocket, the session, the probes or the metrics', () => {
    expect(RESERVED).toEqual(['/v1', '/healthz', '/readyz', '/metrics'])
    for (const path of ['/v1', '/v1/', '/v1/ws', '/v1/session', '/v1/conversations?limit=30', '/healthz', '/readyz', '/metrics', '/metrics/x', '/%76%31/session']) {
      expect(strategy(get(path), origin), path).toBe('network')
      expect(strategy(get(path, 'navigate'), origin), `navigate ${path}`).toBe('network')
    }
    // Only whole segments are reserved.
    expect(strategy(get('/v1x', 'navigate'), origin)).toBe('navigate')
    expect(strategy(get('/metricsabc', 'navigate'), origin)).toBe('navigate')
  })

  it('leaves other methods, ranges, other origins and sw.js to the network', () => {
    expect(strategy({ ...get('/assets/index-abc.js'), method: 'POST' }, origin)).toBe('network')
    expect(strategy({ ...get('/', 'navigate'), method: 'HEAD' }, origin)).toBe('network')
    expect(strategy({ ...get('/assets/a.wasm'), range: true }, origin)).toBe('network')
    expect(strategy({ ...get('/'), url: 'https://livekit.example/rtc' }, origin)).toBe('network')
    expect(strategy({ ...get('/', 'navigate'), url: 'http://alicia.example/' }, origin)).toBe('network')
    expect(strategy(get('/sw.js'), origin)).toBe('network')
  })

  it('serves client routes from the shell when offline, hashed assets from the cache', () => {
    for (const path of ['/', '/c/ac_1', '/c/ac_1?m=am_2', '/memories', '/settings/', '/signin']) expect(strategy(get(path, 'navigate'), origin), path).toBe('navigate')
    expect(strategy(get('/assets/index-abc.js'), origin)).toBe('asset')
    expect(strategy(get('/assets/index-abc.css', 'no-cors'), origin)).toBe('asset')
    expect(strategy(get('/manifest.webmanifest'), origin)).toBe('cached')
    expect(strategy(get('/icon-192.png', 'navigate'), origin)).toBe('cached') // a file, not a route
    expect(strategy(get('/'), origin)).toBe('cached') // fetch('/'): precached only as /index.html
  })
})
