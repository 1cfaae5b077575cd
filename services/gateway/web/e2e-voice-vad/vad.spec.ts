/// <reference lib="dom" />
// The in-page VAD with Chromium's fake microphone playing the noisy
// recording of TestVoiceBrowserVAD (services/e2e/web/vad_test.go): noise
// alone, the question spoken in the noise, more noise, then silence. The
// panel's state must follow the speech, not the noise; with "Send only
// while I speak" nothing reaches the server during the noise alone, and
// the utterance that does reach it starts before the speech (pre-roll) and
// covers all of it, as the ungated one does.
import { expect, test, type Page } from '@playwright/test'
import { shot, signIn, stack, userMessages } from '../e2e/fixtures'

const question = 'What is the weather like in Paris tomorrow?'
const speechAt = Number(process.env.ALICIA_WEB_SPEECH_AT_MS)
const speechMs = Number(process.env.ALICIA_WEB_SPEECH_MS)
const asrLog = process.env.ALICIA_WEB_ASR_LOG_URL!

// What the fake transcriber received (vad_test.go's heard).
interface Heard {
  text: string
  durationMs: number
  levelDBFS: number
  speechAtMs: number
  speechMs: number
  leadMs: number
}
const heard = async (): Promise<Heard[]> => (await fetch(asrLog)).json() as Promise<Heard[]>

interface Probe {
  micAt?: number
  phases: { phase: string; at: number }[]
  voice: { kind: string; at: number }[]
  vad: ({ at: number } & Record<string, number | boolean | string | number[]>)[]
  pcs: RTCPeerConnection[]
}
declare global {
  interface Window {
    __probe: Probe
  }
}

// instrument records, from before the page's scripts run: when the
// microphone opened (the fake file plays from then), every change of the
// panel's state, the page's voice and VAD events, and its peer connections.
async function instrument(page: Page) {
  await page.addInitScript(() => {
    const p: Probe = { phases: [], voice: [], vad: [], pcs: [] }
    window.__probe = p
    const gum = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices)
    navigator.mediaDevices.getUserMedia = async (c) => {
      const s = await gum(c)
      p.micAt ??= performance.now()
      return s
    }
    const PC = window.RTCPeerConnection
    window.RTCPeerConnection = class extends PC {
      constructor(cfg?: RTCConfiguration) {
        super(cfg)
        p.pcs.push(this)
      }
    }
    window.addEventListener('alicia:voice', (e) => p.voice.push((e as CustomEvent<{ kind: string; at: number }>).detail))
    window.addEventListener('alicia:vad', (e) => p.vad.push({ ...(e as CustomEvent<Record<string, number>>).detail, at: performance.now() }))
    new MutationObserver(() => {
      const phase = document.querySelector('[data-testid="voice-state"]')?.getAttribute('data-phase') ?? 'none'
      if (p.phases.at(-1)?.phase !== phase) p.phases.push({ phase, at: performance.now() })
    }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-phase'] })
  })
}

// sender: what the page's microphone sender has been given so far, from
// WebRTC's own statistics: the energy of the audio fed to it and the bytes sent.
async function sender(page: Page): Promise<{ energy: number; bytes: number }> {
  return page.evaluate(async () => {
    let energy = 0
    let bytes = 0
    for (const pc of window.__probe.pcs) {
      if (pc.connectionState === 'closed') continue
      ;(await pc.getStats()).forEach((r: { type: string; kind?: string; totalAudioEnergy?: number; bytesSent?: number }) => {
        if (r.type === 'media-source' && r.kind === 'audio') energy += r.totalAudioEnergy ?? 0
        if (r.type === 'outbound-rtp' && r.kind === 'audio') bytes += r.bytesSent ?? 0
      })
    }
    return { energy, bytes }
  })
}

async function startVoice(page: Page) {
  await instrument(page)
  await signIn(page, stack.aliceKey)
  await page.getByRole('button', { name: 'Talk to Alicia' }).click()
  await page.waitForURL(/\/c\/[^/?]+/)
  await expect(page.getByTestId('voice-state')).toHaveAttribute('data-phase', 'listening', { timeout: 30_000 })
}

// userSpans: the intervals the panel said "You are speaking" that began once
// the VAD ran (before its model is ready the panel follows the level), in ms from
// the microphone's opening (the recording's time).
async function userSpans(page: Page): Promise<{ from: number; to: number }[]> {
  const p = await page.evaluate(() => ({
    micAt: window.__probe.micAt ?? 0,
    readyAt: window.__probe.voice.find((e) => e.kind === 'vad-ready')?.at ?? Infinity,
    phases: window.__probe.phases,
    now: performance.now(),
  }))
  const spans: { from: number; to: number }[] = []
  p.phases.forEach((x, i) => {
    const to = p.phases[i + 1]?.at ?? p.now
    if (x.phase === 'user' && x.at >= p.readyAt) spans.push({ from: x.at - p.micAt, to: to - p.micAt })
  })
  return spans
}

// expectStatesFollowSpeech: one span of "You are speaking", around the
// speech (the fake file starts when the microphone opens, give or take the
// capture's start; the end comes after the detector's 512 ms redemption).
function expectStatesFollowSpeech(spans: { from: number; to: number }[]) {
  expect(spans.length, JSON.stringify(spans)).toBe(1)
  const s = spans[0]!
  expect(s.from, `speech at ${speechAt} ms, "You are speaking" from ${s.from}`).toBeGreaterThan(speechAt - 400)
  expect(s.from).toBeLessThan(speechAt + 600)
  expect(s.to, `speech ends at ${speechAt + speechMs} ms, "You are speaking" until ${s.to}`).toBeGreaterThan(speechAt + speechMs - 300)
  expect(s.to).toBeLessThan(speechAt + speechMs + 1500)
}

async function vadCost(page: Page): Promise<string> {
  // The first second holds the model's first runs (compiling): left out.
  const s = await page.evaluate(() => window.__probe.vad.filter((r) => r.type === 'stats').slice(1))
  const times = s.flatMap((r) => r.times as unknown as number[]).sort((a, b) => a - b)
  const q = (f: number) => (times[Math.min(times.length - 1, Math.floor(f * times.length))] ?? NaN).toFixed(2)
  const mean = times.reduce((a, b) => a + b, 0) / times.length
  return `VAD worker: ${times.length} frames of 32 ms, per frame p50 ${q(0.5)} ms, p90 ${q(0.9)}, p99 ${q(0.99)}, mean ${mean.toFixed(2)} ms = ${((mean / 32) * 100).toFixed(1)}% of one core`
}

test.describe.configure({ mode: 'serial' })
let ungated: Heard | undefined

// cpu: the CPU time (s) of the browser's processes so far, by type
// (renderer: the page, its worker and worklet; browser, GPU, utility: the
// audio service among them), from Chromium's SystemInfo.
async function cpu(page: Page): Promise<Record<string, number>> {
  const b = await page.context().browser()!.newBrowserCDPSession()
  const { processInfo } = (await b.send('SystemInfo.getProcessInfo')) as { processInfo: { type: string; cpuTime: number }[] }
  await b.detach()
  const by: Record<string, number> = {}
  for (const p of processInfo) by[p.type] = (by[p.type] ?? 0) + p.cpuTime
  return by
}

test('the panel follows the speech, not the noise (microphone always sent)', async ({ page }) => {
  const cdp = await page.context().newCDPSession(page)
  await cdp.send('Performance.enable')
  await startVoice(page)
  // The page's CPU with the VAD running: from its model's first second on.
  await expect.poll(() => page.evaluate(() => window.__probe.voice.some((e) => e.kind === 'vad-ready')), { timeout: 20_000 }).toBe(true)
  await page.waitForTimeout(1000)
  const c0 = await cpu(page)
  const m0 = await cdp.send('Performance.getMetrics')
  await expect(page.getByTestId('mic-gate')).toHaveCount(0)
  await expect(userMessages(page).last()).toContainText(question, { timeout: speechAt + speechMs + 20_000 })
  await expect(page.getByTestId('voice-state')).not.toHaveAttribute('data-phase', 'user')
  expectStatesFollowSpeech(await userSpans(page))
  // The level meter (energy) for comparison: how often it took noise for speech.
  const meter = await page.evaluate(() => window.__probe.voice.filter((e) => e.kind === 'user-speech-start').map((e) => Math.round(e.at - (window.__probe.micAt ?? 0))))
  const ready = await page.evaluate(() => (window.__probe.voice.find((e) => e.kind === 'vad-ready')?.at ?? NaN) - (window.__probe.micAt ?? 0))
  console.log(`VAD ready ${ready.toFixed(0)} ms after the microphone opened`)
  console.log(`energy meter speech starts (ms from the microphone's opening): ${meter.join(', ')}; speech at ${speechAt}`)
  const log = await heard()
  ungated = log.filter((h) => h.text === question).at(-1)
  expect(ungated, JSON.stringify(log)).toBeDefined()
  console.log(`ungated: ${JSON.stringify(ungated)}`)
  const m1 = await cdp.send('Performance.getMetrics')
  const c1 = await cpu(page)
  const metric = (m: typeof m0, n: string) => m.metrics.find((x) => x.name === n)?.value ?? 0
  const wall = metric(m1, 'Timestamp') - metric(m0, 'Timestamp')
  const share = Object.keys(c1).map((k) => `${k} ${((((c1[k] ?? 0) - (c0[k] ?? 0)) / wall) * 100).toFixed(1)}%`).join(', ')
  console.log(`${await vadCost(page)}; over ${wall.toFixed(1)} s: page main thread busy ${(((metric(m1, 'TaskDuration') - metric(m0, 'TaskDuration')) / wall) * 100).toFixed(1)}%; processes' CPU (of one core): ${share}`)
  await page.getByRole('button', { name: 'End voice' }).click()
})

test('send only while I speak: nothing during noise alone, the utterance whole with its pre-roll', async ({ page }) => {
  const before = (await heard()).length
  await startVoice(page)
  await page.getByLabel('Send only while I speak').check()
  const gate = page.getByTestId('mic-gate')
  await expect(gate).toHaveAttribute('data-open', 'false')
  await expect.poll(() => page.evaluate(() => window.__probe.vad.some((r) => r.type === 'gate' && r.enabled === true))).toBe(true)
  // From now until the speech: nothing goes out (after what was already
  // in WebRTC's pipeline and statistics when the gate closed).
  await page.waitForTimeout(500)
  const s0 = await sender(page)
  const samples: { at: number; energy: number; bytes: number }[] = []
  const onset = () => page.evaluate(() => window.__probe.voice.find((e) => e.kind === 'vad-speech-start')?.at)
  while ((await onset()) === undefined) {
    const s = await sender(page)
    samples.push({ at: await page.evaluate(() => performance.now() - (window.__probe.micAt ?? 0)), ...s })
    await page.waitForTimeout(200)
  }
  expect(samples.length, 'noise alone was sampled').toBeGreaterThan(5)
  const noiseAlone = samples.filter((x) => x.at < speechAt - 100)
  expect(noiseAlone.length).toBeGreaterThan(5)
  // (WebRTC's energy is a float sum: zeros add nothing but rounding; a
  // second of this noise adds about 1e-3.)
  for (const x of noiseAlone) expect(x.energy - s0.energy, `audio energy given to the sender during noise alone at ${x.at.toFixed(0)} ms`).toBeLessThan(1e-8)
  const onsetAt = (await onset())!
  const gateBefore = await page.evaluate((t) => window.__probe.vad.filter((r) => r.type === 'gate' && r.enabled === true && r.at < t), onsetAt)
  expect(gateBefore.length).toBeGreaterThan(10)
  const sentDuringNoise = Math.max(...gateBefore.map((r) => Number(r.sentMs))) - Math.min(...gateBefore.map((r) => Number(r.sentMs)))
  expect(sentDuringNoise, 'the gate passed nothing during noise alone').toBe(0)

  // The speech opens the gate and is sent; the transcript is the same.
  await expect(gate).toHaveAttribute('data-open', 'true')
  await shot(page, 'voice-gated')
  await expect(userMessages(page).last()).toContainText(question, { timeout: speechMs + 20_000 })
  await expect(gate).toHaveAttribute('data-open', 'false')
  expectStatesFollowSpeech(await userSpans(page))
  const s1 = await sender(page)
  expect(s1.energy).toBeGreaterThan(s0.energy)

  // What the server received: the utterance's audio begins with sound
  // before its speech (the pre-roll) and its speech is as long as the
  // ungated one's.
  const gated = (await heard()).slice(before).filter((h) => h.text === question).at(-1)
  expect(gated, JSON.stringify(await heard())).toBeDefined()
  console.log(`gated: ${JSON.stringify(gated)}`)
  // The room-agent keeps its own window before the speech it hears (leadMs,
  // 0–120 ms from run to run, gated or not): the speech is as long as
  // ungated, its first syllable not cut.
  expect(gated!.speechMs, 'the speech the server received, gated and not').toBeGreaterThanOrEqual(ungated!.speechMs - 100)
  // The page sent a pre-roll (the output's delay when the gate opened) and
  // caught up by the end (no delay left).
  const reports = await page.evaluate(() => window.__probe.vad.filter((r) => r.type === 'gate'))
  const maxDelay = Math.max(...reports.map((r) => Number(r.delayMs)))
  const last = reports.at(-1)!
  // The delay the gate still had when the speech ended (the VAD's end
  // comes 16 frames, 512 ms, after the last frame of speech): what it adds
  // to the end of the turn.
  const end = await page.evaluate(() => window.__probe.voice.find((e) => e.kind === 'vad-speech-end')?.at)
  const atEnd = reports.filter((r) => r.at <= end! - 512).at(-1)
  console.log(`gate: delay when the speech ended ${Number(atEnd?.delayMs).toFixed(0)} ms`)
  console.log(`gate: the most delay ${maxDelay.toFixed(0)} ms, at the end ${JSON.stringify(last)}; ${await vadCost(page)}`)
  // (At least the 96 ms kept before speech's rise and the onset's chunk.)
  expect(maxDelay).toBeGreaterThanOrEqual(120)
  expect(Number(last.delayMs)).toBe(0)
  expect(Number(last.droppedMs)).toBeGreaterThan(0)
})
