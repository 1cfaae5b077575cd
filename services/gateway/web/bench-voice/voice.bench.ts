/// <reference lib="dom" />
// In the page: the end of the person's speech (the fake microphone's last
// loud sample, as the page's analyser hears it) → the first sample of
// Alicia's answer heard (an analyser on the remote track), for every turn
// of the recording; the voice code loaded on first use (its size) and the
// time from pressing the microphone to "listening", cold (first use) and
// warm (again, the code cached).
import { gzipSync } from 'node:zlib'
import { expect, test } from '@playwright/test'
import { bench, kib, quantile, round, writeResult } from '../bench/common'

const turns = Number(process.env.ALICIA_WEB_BENCH_VOICE_TURNS)
const warmup = Number(process.env.ALICIA_WEB_BENCH_VOICE_WARMUP)

interface VoiceEvent {
  kind: string
  at: number
}
declare global {
  interface Window {
    __pressedAt?: number[]
  }
}

test('voice in the page', async ({ page }) => {
  const res = await page.request.post('/v1/session', { data: { apiKey: bench.key } })
  expect(res.ok()).toBe(true)
  await page.addInitScript(() => {
    const voice: VoiceEvent[] = []
    const pressed: number[] = []
    window.__voice = voice
    window.__pressedAt = pressed
    window.addEventListener('alicia:voice', (e) => voice.push((e as CustomEvent<VoiceEvent>).detail))
    document.addEventListener('click', () => pressed.push(performance.now()), true)
  })
  await page.goto('/')
  await expect(page.getByLabel('Message Alicia')).toBeEnabled()

  // The JavaScript fetched from pressing the microphone on: the voice code.
  const voiceJS: { url: string; body: Buffer }[] = []
  page.on('response', async (r) => {
    if (!r.url().endsWith('.js')) return
    voiceJS.push({ url: r.url(), body: await r.body().catch(() => Buffer.alloc(0)) })
  })
  const events = () => page.evaluate(() => window.__voice ?? [])
  const listening = async (n: number) => {
    await expect.poll(async () => (await events()).filter((e) => e.kind === 'listening').length).toBeGreaterThanOrEqual(n)
    const [ev, pressed] = await page.evaluate(() => [(window.__voice ?? []).filter((e) => e.kind === 'listening'), window.__pressedAt ?? []] as const)
    return ev[n - 1]!.at - pressed[pressed.length - 1]!
  }

  await page.getByRole('button', { name: 'Talk to Alicia' }).click()
  const cold = await listening(1)

  // Every turn of the recording: a user-speech-end, then the answer's first
  // audio. Pairs end of speech with the first audio after it.
  await expect.poll(async () => (await events()).filter((e) => e.kind === 'agent-audio-start').length, { timeout: (turns + warmup) * 15_000 })
    .toBeGreaterThanOrEqual(turns + warmup)
  const ev = await events()
  const ends = ev.filter((e) => e.kind === 'user-speech-end')
  const starts = ev.filter((e) => e.kind === 'agent-audio-start')
  const v2v: number[] = []
  for (const end of ends) {
    const first = starts.find((s) => s.at > end.at)
    const nextEnd = ends.find((e) => e.at > end.at)
    if (first && (!nextEnd || first.at < nextEnd.at)) v2v.push(first.at - end.at)
  }
  const measured = v2v.slice(warmup)

  // Again, with the voice code cached: pressing → listening, warm.
  await page.getByRole('button', { name: 'End voice' }).click()
  await page.getByRole('button', { name: 'Talk to Alicia' }).click()
  const warm = await listening(2)
  await page.getByRole('button', { name: 'End voice' }).click()

  const engine = voiceJS.filter((r) => /\/assets\/engine-[^/]+\.js$/.test(r.url))
  expect(engine.length, 'the voice code was fetched when the microphone was pressed').toBeGreaterThan(0)
  const gz9 = engine.reduce((n, r) => n + gzipSync(r.body, { level: 9 }).length, 0)
  writeResult('voice', {
    'page-v2v-p50-ms': quantile(measured, 0.5),
    'page-v2v-p90-ms': quantile(measured, 0.9),
    'page-v2v-p99-ms': quantile(measured, 0.99),
    'page-v2v-turns': measured.length,
    'voice-js-gzip9-KiB': kib(gz9),
    'voice-js-raw-KiB': kib(engine.reduce((n, r) => n + r.body.length, 0)),
    'mic-to-listening-cold-ms': cold,
    'mic-to-listening-warm-ms': warm,
  }, { v2vMs: v2v.map((x) => round(x)), warmup })
})
