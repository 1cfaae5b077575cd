/// <reference lib="dom" />
// Talking to Alicia in the browser: Chromium's fake microphone plays the
// recording of TestVoiceBrowser (services/e2e/web/voice_test.go;
// keep the phrases in step): lead silence, the question, a pause while the
// answer starts playing, an interruption, silence.
import { expect, test, type Page } from '@playwright/test'
import { answers, axe, PHONE, shot, signIn, stack, userMessages } from '../e2e/fixtures'

const question = 'What is the weather like in Paris tomorrow?'
const interruption = 'Actually, never mind the weather in Paris. I would much rather hear a short joke about cats instead, please.'
const partial = 'What is the weather'
const joke = 'To keep an eye on the mouse!'
const at = {
  question: Number(process.env.ALICIA_WEB_QUESTION_AT_MS),
  interrupt: Number(process.env.ALICIA_WEB_INTERRUPT_AT_MS),
  interruptLength: Number(process.env.ALICIA_WEB_INTERRUPT_MS),
}

interface VoiceEvent {
  kind: string
  at: number
}
declare global {
  interface Window {
    __voice?: VoiceEvent[]
  }
}

const state = (page: Page) => page.getByTestId('voice-state')

// startVoice records the page's voice events and presses the microphone.
async function startVoice(page: Page): Promise<void> {
  await page.evaluate(() => {
    window.__voice = []
    window.addEventListener('alicia:voice', (e) => window.__voice!.push((e as CustomEvent<VoiceEvent>).detail))
  })
  await page.getByRole('button', { name: 'Talk to Alicia' }).click()
  await page.waitForURL(/\/c\/[^/?]+/)
  await expect(state(page)).not.toHaveAttribute('data-phase', 'connecting', { timeout: 30_000 })
}

const events = (page: Page, kind: string) => page.evaluate((k) => (window.__voice ?? []).filter((e) => e.kind === k), kind)

test('a spoken question, its answer heard, and a barge-in that cuts it off', async ({ page }) => {
  await signIn(page, stack.aliceKey)
  await startVoice(page)
  await expect(state(page)).toHaveAttribute('data-phase', 'listening')
  await axe(page, 'voice')

  // While the person speaks: the level moves, the state says so, and the
  // partial transcript shows.
  await expect(state(page)).toHaveAttribute('data-phase', 'user', { timeout: at.question + 10_000 })
  await expect.poll(() => page.getByTestId('mic-level').evaluate((m) => (m as HTMLMeterElement).value)).toBeGreaterThan(0)
  await expect(page.getByTestId('partial-transcript')).toContainText(partial)
  // The final transcript becomes the person's message.
  await expect(userMessages(page).last()).toContainText(question, { timeout: 20_000 })
  await expect(page.getByTestId('partial-transcript')).toHaveCount(0)

  // The answer's audio plays in the page (an analyser on the remote track),
  // its text follows the sentence being heard.
  await expect.poll(async () => (await events(page, 'agent-audio-start')).length, { timeout: 20_000 }).toBeGreaterThan(0)
  await expect(answers(page).first().locator('[data-playout="playing"]')).toHaveCount(1)
  await shot(page, 'voice')

  // The interruption: Alicia stops, and the answer shows what was heard
  // and, set apart, what was never played.
  const first = answers(page).first()
  await expect(first.getByTestId('not-heard')).toBeVisible({ timeout: at.interrupt + 20_000 })
  await expect(first).toContainText('Interrupted')
  const heard = (await first.locator('.prose-alicia').innerText()).trim()
  expect(heard.startsWith('Tomorrow in Paris will be mostly sunny.'), heard).toBe(true)
  await shot(page, 'voice-interrupted')
  const notHeard = await first.getByTestId('not-heard').innerText()
  expect(notHeard).toContain('Enjoy your day in Paris!')
  expect(notHeard).not.toContain(heard.split('.')[0]!)
  // The agent's audio stopped soon after the interruption began (it is
  // heard again only for the next answer).
  const starts = await events(page, 'user-speech-start')
  const cut = starts.find((e) => e.at > (starts[0]?.at ?? 0) + 1000)
  expect(cut, 'the interruption was heard in the page').toBeDefined()
  await expect.poll(async () => (await events(page, 'agent-audio-end')).some((e) => e.at > cut!.at && e.at < cut!.at + 2000)).toBe(true)

  // Where the spoken answer's time went, from the stream's timestamps.
  const wf = first.getByTestId('waterfall')
  for (const mark of ['transcript', 'answer started', 'first sentence', 'first audio']) await expect(wf.locator(`[data-mark="${mark}"]`)).toContainText(/\+\d+ ms/)
  await expect(wf).toContainText('end of speech → first audio')

  // The interruption is the next question, and its answer plays.
  await expect(userMessages(page).last()).toContainText(interruption, { timeout: at.interruptLength + 20_000 })
  await expect(answers(page).last()).toContainText(joke, { timeout: 20_000 })
  await expect.poll(async () => (await events(page, 'agent-audio-start')).filter((e) => e.at > cut!.at).length, { timeout: 20_000 }).toBeGreaterThan(0)
  await expect(answers(page).last()).toHaveAttribute('data-status', 'completed')

  // Text and voice mix: a typed message in the same conversation.
  await page.getByLabel('Message Alicia').fill('Typed while talking')
  await page.getByLabel('Message Alicia').press('Enter')
  await expect(userMessages(page).last()).toContainText('Typed while talking')
  await expect(answers(page)).toHaveCount(3)

  // Ending the call releases the microphone; a reload shows the cut answer
  // the same way, from what the server stored.
  await page.getByRole('button', { name: 'End voice' }).click()
  await expect(state(page)).toHaveCount(0)
  await page.reload()
  await expect(answers(page).first().getByTestId('not-heard')).toContainText('Enjoy your day in Paris!')
  await expect(answers(page).first()).toContainText('Interrupted')
  // The call's SessionStats, once the agent left the room: shown live, and
  // from what was stored after another reload.
  await expect(page.getByTestId('last-call')).toContainText(/Last call: \d+ s · [1-9]\d* messages/, { timeout: 30_000 })
  await page.reload()
  await expect(page.getByTestId('last-call')).toContainText(/Last call: \d+ s · [1-9]\d* messages/)
  await shot(page, 'last-call')
})

test('mute and push-to-talk send nothing until the person allows it', async ({ page }) => {
  await signIn(page, stack.aliceKey)
  await startVoice(page)
  // Push-to-talk on before the question: nothing of it reaches Alicia.
  await page.getByLabel('Push to talk').check()
  const talk = page.getByRole('button', { name: 'Hold to talk' })
  await expect(talk).toBeVisible()
  await page.waitForTimeout(at.question + 4000 - 2000) // the question plays, unheard
  await expect(page.getByTestId('mic-level')).toHaveJSProperty('value', 0)
  await expect(userMessages(page)).toHaveCount(0)
  // Holding the talk button through the interruption sends it.
  await talk.hover()
  await page.mouse.down()
  await expect(state(page)).toHaveAttribute('data-phase', 'user', { timeout: 15_000 })
  await expect(userMessages(page).last()).toContainText(interruption, { timeout: 30_000 }).catch(async () => {
    await page.mouse.up()
    throw new Error('the held interruption was not transcribed')
  })
  await page.mouse.up()
  await expect(talk).toHaveAttribute('aria-pressed', 'false')
  // Mute: the level drops to nothing and the state says so.
  await page.getByLabel('Push to talk').uncheck()
  await page.getByRole('button', { name: 'Mute' }).click()
  await expect(state(page)).toHaveAttribute('data-phase', /muted|agent|thinking/)
  await expect(page.getByTestId('mic-level')).toHaveJSProperty('value', 0)
  await expect(page.getByRole('button', { name: 'Unmute' })).toHaveAttribute('aria-pressed', 'true')
})

test('voice on a phone', async ({ page }) => {
  await page.setViewportSize(PHONE)
  await signIn(page, stack.aliceKey)
  await startVoice(page)
  await expect(state(page)).toBeVisible()
  await axe(page, 'voice')
  await expect(state(page)).toHaveAttribute('data-phase', 'user', { timeout: at.question + 10_000 })
  await shot(page, 'voice')
  // Its question is answered, then the call ends: what it amounted to shows.
  await expect(answers(page).first()).toHaveAttribute('data-status', 'completed', { timeout: 30_000 })
  await page.getByRole('button', { name: 'End voice' }).click()
  await expect(page.getByTestId('last-call')).toContainText(/Last call: \d+ s · [1-9]\d* messages/, { timeout: 30_000 })
  await shot(page, 'last-call')
})
