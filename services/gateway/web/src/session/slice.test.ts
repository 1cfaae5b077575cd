import { FakeServer, fakeLocation } from '../testing/browser'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { ApiError } from '../api'
import { createAppStore } from '../store/app'
import { signInError } from './slice'

let server: FakeServer
beforeEach(() => {
  server = new FakeServer()
})
afterEach(() => vi.useRealTimers())

describe('session', () => {
  it('is null with no notice when there is none (401), null with the reason when it cannot be checked', async () => {
    const s = createAppStore()
    server.on('GET /v1/session', { status: 401, body: { error: { message: 'no session' } } })
    await s.getState().loadSession()
    expect(s.getState()).toMatchObject({ session: null, sessionError: undefined })

    server.on('GET /v1/session', { status: 503, body: { error: { message: 'the gateway is starting' } } })
    await s.getState().loadSession()
    expect(s.getState()).toMatchObject({ session: null, sessionError: 'the gateway is starting' })

    server.on('GET /v1/session', { status: 200, body: { user: 'alice', admin: true } })
    await s.getState().loadSession()
    expect(s.getState()).toMatchObject({ session: { user: 'alice', admin: true }, sessionError: undefined })
  })

  it('signs in with the trimmed key, and out to the sign-in with nothing of the user left', async () => {
    const s = createAppStore()
    server.on('POST /v1/session', ({ body }) => ((body as { apiKey: string }).apiKey === 'k1' ? { status: 200, body: { user: 'bob', admin: false } } : { status: 401 }))
      .on('DELETE /v1/session', { status: 204 })
      .on('GET /v1/conversations', { status: 200, body: { conversations: [{ id: 'ac_1', title: 't', status: 'active', createdAt: 1, updatedAt: 1, lastClientStanzaId: 0 }] } })
    await s.getState().signIn('  k1 ')
    expect(s.getState().session?.user).toBe('bob')
    await s.getState().loadConversations()
    expect(s.getState().conversations).toHaveLength(1)

    await s.getState().signOut()
    expect(s.getState()).toMatchObject({ session: null, conversations: [], chat: null })
    expect(fakeLocation.pathname).toBe('/signin')
  })

  it('an ended session says so and closes the open conversation', () => {
    const s = createAppStore()
    s.setState({ session: { user: 'alice', admin: false, expiresAt: 0 }, chatLoad: 'ready' })
    s.getState().expired()
    expect(s.getState()).toMatchObject({ session: null, sessionError: 'Your session has ended. Sign in again.', chatLoad: 'idle' })
  })

  it('checkSession asks at most every 5 s, and a 401 ends the session', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    const s = createAppStore()
    s.setState({ session: { user: 'alice', admin: false, expiresAt: 0 } })
    server.on('GET /v1/session', { status: 200, body: { user: 'alice', admin: false, expiresAt: 0 } })
    s.getState().checkSession()
    s.getState().checkSession()
    expect(server.requests.filter((r) => r.path === '/v1/session')).toHaveLength(1)

    server.on('GET /v1/session', { status: 401 })
    vi.advanceTimersByTime(5000)
    s.getState().checkSession()
    await vi.waitFor(() => expect(s.getState().session).toBeNull())
    expect(server.requests.filter((r) => r.path === '/v1/session')).toHaveLength(2)
  })

  it('says why a key was refused in the person’s words, else the server’s', () => {
    expect(signInError(new ApiError(401, 'unauthorized'))).toBe('That API key is not valid.')
    expect(signInError(new ApiError(429, 'slow down'))).toBe('Too many attempts. Wait a minute and try again.')
    expect(signInError(new ApiError(0, 'offline: the server cannot be reached'))).toBe('offline: the server cannot be reached')
  })
})
