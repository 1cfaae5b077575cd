import { describe, expect, it } from 'vitest'
import {
  backendNotices, checkVoice, classifyError, countMicrophones, disconnectProblem, isCancelled, microphonePermission,
  originProblem, problem, VoiceTimeoutError, type BrowserLike, type VoiceProblemKind,
} from './preflight'

// browser builds a stand-in for window: a secure page with one microphone
// and the permission still to ask, unless told otherwise.
function browser(o: {
  secure?: boolean | undefined
  hostname?: string
  protocol?: string
  mediaDevices?: BrowserLike['navigator']['mediaDevices'] | null
  devices?: { kind: string }[] | Error
  permission?: string | Error | null
} = {}): BrowserLike {
  const devices = o.devices ?? [{ kind: 'audioinput' }, { kind: 'audiooutput' }]
  const mediaDevices =
    o.mediaDevices === null
      ? undefined
      : (o.mediaDevices ?? {
          getUserMedia: () => Promise.reject(new Error('not in this test')),
          enumerateDevices: () => (devices instanceof Error ? Promise.reject(devices) : Promise.resolve(devices)),
        })
  const permission = o.permission === undefined ? 'prompt' : o.permission
  return {
    isSecureContext: 'secure' in o ? o.secure : true,
    location: { protocol: o.protocol ?? 'https:', hostname: o.hostname ?? 'alicia.local' },
    navigator: {
      mediaDevices,
      permissions:
        permission === null
          ? undefined
          : {
              query: (d: { name: string }) => {
                if (d.name !== 'microphone') return Promise.reject(new TypeError(`unexpected ${d.name}`))
                return permission instanceof Error ? Promise.reject(permission) : Promise.resolve({ state: permission })
              },
            },
    },
  }
}

// What getUserMedia and livekit-client throw, by name.
function domError(name: string, message = `${name} message`): Error {
  const e = new Error(message)
  e.name = name
  return e
}
function connectionError(reasonName: string, message: string) {
  return Object.assign(domError('ConnectionError', message), { reasonName, reason: 2 })
}

describe('insecure origin', () => {
  it('is a page over plain http from another host: no secure context, no mediaDevices', () => {
    const p = originProblem(browser({ secure: false, protocol: 'http:', hostname: '192.168.1.20', mediaDevices: null }))
    expect(p?.kind).toBe('insecure-origin')
    expect(p?.message).toContain('Voice needs a secure page')
    expect(p?.message).toContain('https://192.168.1.20:8443')
    expect(p?.message).toContain('/ca')
    expect(p?.message).toContain('http://localhost')
  })

  it('is also a secure context whose browser gives no mediaDevices, or one without getUserMedia', () => {
    expect(originProblem(browser({ mediaDevices: null }))?.kind).toBe('insecure-origin')
    expect(originProblem(browser({ mediaDevices: {} }))?.kind).toBe('insecure-origin')
  })

  it('is not a secure page with getUserMedia, nor an old browser that does not say (isSecureContext undefined)', () => {
    expect(originProblem(browser())).toBeUndefined()
    expect(originProblem(browser({ secure: undefined }))).toBeUndefined()
  })

  it('wins over everything else in the check, which then asks nothing', async () => {
    const c = await checkVoice(browser({ secure: false, hostname: '10.0.0.7', mediaDevices: null, permission: 'denied' }))
    expect(c.secure).toBe(false)
    expect(c.problems.map((p) => p.kind)).toEqual(['insecure-origin'])
    expect(c.problems[0]?.message).toContain('https://10.0.0.7:8443')
  })

  it('from a TypeError reading getUserMedia of undefined in the microphone step', () => {
    const p = classifyError(new TypeError("Cannot read properties of undefined (reading 'getUserMedia')"), { stage: 'microphone', hostname: 'h' })
    expect(p.kind).toBe('insecure-origin')
  })
})

describe('the check without prompting', () => {
  it('finds nothing wrong on a secure page with a microphone', async () => {
    const c = await checkVoice(browser({ permission: 'granted' }))
    expect(c).toEqual({ secure: true, microphones: 1, permission: 'granted', problems: [] })
  })

  it('says no-microphone when no audio input is listed', async () => {
    const c = await checkVoice(browser({ devices: [{ kind: 'audiooutput' }, { kind: 'videoinput' }] }))
    expect(c.microphones).toBe(0)
    expect(c.problems.map((p) => p.kind)).toEqual(['no-microphone'])
  })

  it("says permission-denied when permissions.query({name: 'microphone'}) is denied", async () => {
    const c = await checkVoice(browser({ permission: 'denied' }))
    expect(c.permission).toBe('denied')
    expect(c.problems.map((p) => p.kind)).toEqual(['permission-denied'])
  })

  it('lists both, the microphone first', async () => {
    const c = await checkVoice(browser({ devices: [], permission: 'denied' }))
    expect(c.problems.map((p) => p.kind)).toEqual(['no-microphone', 'permission-denied'])
  })

  it('does not guess when the browser cannot say', async () => {
    expect(await microphonePermission(browser({ permission: new TypeError("'microphone' is not a valid PermissionName") }))).toBe('unknown')
    expect(await microphonePermission(browser({ permission: null }))).toBe('unknown')
    expect(await microphonePermission(browser({ permission: 'something-new' }))).toBe('unknown')
    expect(await countMicrophones(browser({ devices: new Error('nope') }))).toBeUndefined()
    expect(await countMicrophones(browser({ mediaDevices: { getUserMedia: () => Promise.reject(new Error('x')) } }))).toBeUndefined()
    const c = await checkVoice(browser({ devices: new Error('nope'), permission: null }))
    expect(c).toEqual({ secure: true, microphones: undefined, permission: 'unknown', problems: [] })
  })
})

describe("getUserMedia's errors", () => {
  const cases: [string, VoiceProblemKind][] = [
    ['NotAllowedError', 'permission-denied'],
    ['PermissionDeniedError', 'permission-denied'],
    ['SecurityError', 'permission-denied'],
    ['NotFoundError', 'no-microphone'],
    ['DevicesNotFoundError', 'no-microphone'],
    ['OverconstrainedError', 'no-microphone'],
    ['NotReadableError', 'microphone-busy'],
    ['TrackStartError', 'microphone-busy'],
    ['AbortError', 'microphone-busy'],
  ]
  for (const [name, kind] of cases) {
    it(`${name} is ${kind}`, () => {
      const p = classifyError(domError(name, 'what the browser said'), { stage: 'microphone' })
      expect(p.kind).toBe(kind)
      expect(p.detail).toBe('what the browser said')
    })
  }

  it('a DOMException as the browser throws it', () => {
    expect(classifyError(new DOMException('Permission denied', 'NotAllowedError'), { stage: 'microphone' }).kind).toBe('permission-denied')
    expect(classifyError(new DOMException('Requested device not found', 'NotFoundError'), { stage: 'microphone' }).kind).toBe('no-microphone')
  })

  it('the permission sentence says how to allow it again', () => {
    expect(problem('permission-denied').message).toMatch(/site's settings.*Microphone → Allow/)
  })
})

describe("LiveKit's connection", () => {
  const url = 'ws://192.168.1.20:7880'

  it('media-blocked: signalling connected, the peer connection did not (ICE)', () => {
    const p = classifyError(connectionError('InternalError', 'could not establish pc connection'), { stage: 'media', signalConnected: true, serverUrl: url })
    expect(p.kind).toBe('media-blocked')
    expect(p.message).toMatch(/^Audio could not reach the server: UDP port 7882 \(or TCP 7881\) of the server is blocked/)
    expect(p.message).toContain('ALICIA_LIVEKIT_NODE_IP')
    expect(p.detail).toBe('could not establish pc connection')
  })

  it('media-blocked: the engine timed out after signalling', () => {
    expect(classifyError(new VoiceTimeoutError('no connection within 30 s'), { stage: 'signal', signalConnected: true }).kind).toBe('media-blocked')
  })

  it('media-blocked: publishing the microphone found no transport', () => {
    const p = classifyError(connectionError('Timeout', 'publication of local track timed out, no response from server'), { stage: 'publish', signalConnected: true })
    expect(p.kind).toBe('media-blocked')
    expect(classifyError(new Error('could not establish publisher connection'), { stage: 'publish', signalConnected: true }).kind).toBe('media-blocked')
  })

  it('server-unreachable: the signalling WebSocket did not connect', () => {
    const p = classifyError(connectionError('ServerUnreachable', 'could not establish signal connection: Failed to fetch'), { stage: 'signal', serverUrl: url, pageProtocol: 'http:' })
    expect(p.kind).toBe('server-unreachable')
    expect(p.message).toContain(`LiveKit at ${url}`)
    expect(p.message).toContain('7880')
    expect(classifyError(new VoiceTimeoutError('no connection within 30 s'), { stage: 'signal' }).kind).toBe('server-unreachable')
    expect(classifyError(connectionError('WebSocket', 'ws'), { stage: 'signal' }).kind).toBe('server-unreachable')
  })

  it('server-unreachable: an https page given a plain ws:// address (mixed content)', () => {
    const p = classifyError(connectionError('ServerUnreachable', 'could not establish signal connection'), { stage: 'signal', serverUrl: url, pageProtocol: 'https:' })
    expect(p.kind).toBe('server-unreachable')
    expect(p.message).toContain('wss://')
    expect(p.message).toContain('ALICIA_LIVEKIT_PUBLIC_URL')
    const ok = classifyError(connectionError('ServerUnreachable', 'x'), { stage: 'signal', serverUrl: 'wss://voice.example', pageProtocol: 'https:' })
    expect(ok.message).not.toContain('ALICIA_LIVEKIT_PUBLIC_URL')
  })

  it('a refused token is said as it is; a cancelled connection is no problem', () => {
    const p = classifyError(connectionError('NotAllowed', 'invalid token'), { stage: 'signal' })
    expect(p.kind).toBe('other')
    expect(p.message).toContain('invalid token')
    expect(isCancelled(connectionError('Cancelled', 'Client initiated disconnect'))).toBe(true)
    expect(isCancelled(connectionError('InternalError', 'x'))).toBe(false)
    expect(isCancelled(new Error('Cancelled'))).toBe(false)
  })

  it('a disconnect after the session started', () => {
    expect(disconnectProblem('CLIENT_INITIATED')).toBeUndefined()
    expect(disconnectProblem('MEDIA_FAILURE')?.kind).toBe('media-blocked')
    const lost = disconnectProblem('SIGNAL_CLOSE')
    expect(lost?.kind).toBe('other')
    expect(lost?.message).toBe('The voice connection was lost (signal close): press Voice to connect again.')
    expect(disconnectProblem(undefined)?.message).toBe('The voice connection was lost: press Voice to connect again.')
    expect(disconnectProblem('UNKNOWN_REASON')?.message).toBe('The voice connection was lost: press Voice to connect again.')
  })
})

describe('anything else', () => {
  it("shows the error's own message, never throws", () => {
    expect(classifyError(new Error('503 the voice server is not configured'), { stage: 'token' })).toEqual({
      kind: 'other',
      message: 'Voice failed: 503 the voice server is not configured.',
    })
    expect(classifyError(new Error('ends with a stop.'), { stage: 'session' }).message).toBe('Voice failed: ends with a stop.')
    expect(classifyError('a string', { stage: 'session' }).message).toBe('Voice failed: a string.')
    expect(classifyError(undefined, { stage: 'session' }).message).toBe('Voice failed: undefined.')
    expect(classifyError(null, { stage: 'session' }).kind).toBe('other')
    expect(classifyError({ name: 42 }, { stage: 'session' }).kind).toBe('other')
    expect(classifyError(new Error(''), { stage: 'session' }).message).toBe('Voice failed: an unknown error.')
    // A name of getUserMedia's, from elsewhere (AbortError from a fetch), is not the microphone's.
    expect(classifyError(domError('AbortError'), { stage: 'token' }).kind).toBe('other')
  })
})

describe('the sentences', () => {
  const kinds: VoiceProblemKind[] = ['insecure-origin', 'no-microphone', 'permission-denied', 'microphone-busy', 'server-unreachable', 'media-blocked']
  for (const kind of kinds) {
    it(`${kind}: one sentence, what is wrong then the fix`, () => {
      const { message } = problem(kind, { hostname: 'h', serverUrl: 'ws://h:7880' })
      expect(message).toMatch(/^[A-Z][^]*[.]$/)
      expect(message.split(/[.!?] /).length, message).toBe(1)
      expect(message).toContain(': ')
    })
  }
})

describe('speech backends', () => {
  it('says which do not answer', () => {
    expect(backendNotices(undefined)).toEqual([])
    expect(backendNotices({ asr: { reachable: true }, tts: { reachable: true } })).toEqual([])
    const n = backendNotices({ asr: { reachable: false }, tts: { reachable: false } })
    expect(n.map((x) => x.key)).toEqual(['asr', 'tts'])
    expect(n[0]?.message).toMatch(/^Speech recognition is not answering yet/)
    expect(n[1]?.message).toMatch(/^Speech synthesis is not answering yet/)
  })
})
