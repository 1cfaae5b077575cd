/// <reference lib="dom" />
// Alicia from another device of the LAN (playwright.lan.config.ts): the
// HTTPS page opens without a certificate warning because the browser trusts
// the CA `alicia up` made, a spoken question is answered and heard with the
// media over the network between the two hosts, the app is installable,
// and over plain HTTP the page says why voice cannot start.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, test, type Page } from '@playwright/test'

const base = process.env.ALICIA_WEB_BASE_URL!
const httpURL = process.env.ALICIA_WEB_HTTP_URL ?? ''
const key = process.env.ALICIA_WEB_KEY ?? ''
const figures = process.env.ALICIA_WEB_FIGURES ?? ''
const screenshots = process.env.ALICIA_WEB_SCREENSHOTS ?? ''
const question = 'What is the weather like in Paris tomorrow?'
const answer = 'Tomorrow in Paris will be mostly sunny.'
const questionMs = Number(process.env.ALICIA_WEB_QUESTION_MS ?? '0')

interface VoiceEvent {
  kind: string
  at: number
}
declare global {
  interface Window {
    __voice?: VoiceEvent[]
  }
}

const measured: Record<string, unknown> = {}
function record(name: string, value: unknown) {
  measured[name] = value
  if (figures) writeFileSync(figures, JSON.stringify(measured, null, 2))
}

async function shot(page: Page, name: string) {
  if (screenshots) await page.screenshot({ path: join(screenshots, `lan-${name}.png`) })
}

// signIn opens a session from the page itself: the browser, which trusts
// the CA, makes the request (Playwright's own HTTP client would not).
async function signIn(page: Page, origin: string) {
  await page.goto(`${origin}/healthz`) // no page policy to bound its fetch
  const status = await page.evaluate(async (apiKey) => {
    const res = await fetch('/v1/session', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ apiKey }) })
    return `${res.status} ${await res.text()}`
  }, key)
  expect(status.startsWith('2'), `POST /v1/session: ${status}`).toBe(true)
  await page.goto(`${origin}/`)
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

test('the HTTPS page opens trusted, and loads quickly', async ({ page }) => {
  test.skip(!base.startsWith('https://'), 'over HTTPS only')
  const loads: number[] = []
  for (let i = 0; i < 7; i++) {
    // A navigation that fails the certificate check throws here.
    await page.goto(`${base}/ca?load=${i}`)
    await page.goto(`${base}/`, { waitUntil: 'load' })
    loads.push(await page.evaluate(() => {
      const n = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming
      return n.loadEventEnd - n.startTime
    }))
  }
  expect(await page.evaluate(() => window.isSecureContext)).toBe(true)
  record('pageLoadMs', { p50: median(loads), samples: loads })
})

test('a spoken question answered and heard, and the app installable', async ({ page, context }) => {
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  await signIn(page, base)
  await page.evaluate(() => {
    window.__voice = []
    window.addEventListener('alicia:voice', (e) => window.__voice!.push((e as CustomEvent<VoiceEvent>).detail))
  })
  await page.getByRole('button', { name: 'Talk to Alicia' }).click()
  await page.waitForURL(/\/c\/[^/?]+/)
  await expect(page.getByTestId('voice-state')).toHaveAttribute('data-phase', 'listening', { timeout: 30_000 })
  await expect(page.locator('article[data-role="user"]').last()).toContainText(question, { timeout: 40_000 })
  await expect.poll(() => page.evaluate(() => (window.__voice ?? []).some((e) => e.kind === 'agent-audio-start')), { timeout: 30_000 }).toBe(true)
  await expect(page.locator('article[data-role="assistant"]').first()).toContainText(answer)
  await shot(page, 'voice')
  // The end of speech is the onset the page heard plus the question's
  // length in the recording (the page's own end-of-speech mark waits for
  // its hangover, which a fast answer can beat).
  const ev = await page.evaluate(() => window.__voice ?? [])
  const onset = ev.find((e) => e.kind === 'user-speech-start')
  const heard = ev.find((e) => e.kind === 'agent-audio-start' && (!onset || e.at > onset.at))
  expect(onset, 'the page heard the person start speaking').toBeDefined()
  expect(heard, 'the answer was heard after the question').toBeDefined()
  record('endOfSpeechToFirstAudioMs', heard!.at - (onset!.at + questionMs))
  await page.getByRole('button', { name: 'End voice' }).click()

  if (base.startsWith('https://')) {
    // Installable: manifest, icons and a service worker on a secure origin.
    await page.goto(`${base}/`)
    await expect.poll(() => page.evaluate(async () => !!(await navigator.serviceWorker.getRegistration())?.active), { timeout: 20_000 }).toBe(true)
    const cdp = await context.newCDPSession(page)
    const { installabilityErrors } = (await cdp.send('Page.getInstallabilityErrors')) as { installabilityErrors: { errorId: string }[] }
    expect(installabilityErrors.map((e) => e.errorId).filter((id) => id !== 'in-incognito')).toEqual([])
    record('installable', true)
  }
  expect(errors).toEqual([])
})

test('over plain HTTP the page says why voice cannot start', async ({ page }) => {
  test.skip(!httpURL, 'no plain HTTP address on the LAN')
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  await signIn(page, httpURL)
  expect(await page.evaluate(() => window.isSecureContext)).toBe(false)
  const talk = page.getByRole('button', { name: 'Talk to Alicia' })
  if (await talk.isEnabled()) await talk.click()
  const problem = page.locator('[data-voice-problem="insecure-origin"]').first()
  await expect(problem).toBeVisible()
  await expect(problem).toContainText(/HTTPS|https/)
  await shot(page, 'insecure-origin')
  expect(errors).toEqual([])
})
