/// <reference lib="dom" />
// Hands-free mode (issue 30, item 3) in the browser: with it on, the
// recording's question and interruption (neither begins with "Alicia") are
// heard but not taken: the page says so, and neither becomes a message.
// The fake microphone plays TestVoiceBrowser's recording
// (services/e2e/web/voice_test.go).
import { expect, test, type Page } from '@playwright/test'
import { axe, PHONE, shot, signIn, stack, userMessages } from '../e2e/fixtures'

const interruption = 'Actually, never mind the weather in Paris.'
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

const events = (page: Page, kind: string) => page.evaluate((k) => (window.__voice ?? []).filter((e) => e.kind === k), kind)

for (const size of ['desktop', 'phone'] as const) {
  test(`hands-free on a ${size}: speech not addressed to Alicia is neither answered nor stored, and the page says so`, async ({ page }) => {
    if (size === 'phone') await page.setViewportSize(PHONE)
    await signIn(page, stack.aliceKey)
    await page.evaluate(() => {
      window.__voice = []
      window.addEventListener('alicia:voice', (e) => window.__voice!.push((e as CustomEvent<VoiceEvent>).detail))
    })
    await page.getByRole('button', { name: 'Talk to Alicia' }).click()
    await page.waitForURL(/\/c\/[^/?]+/)
    const toggle = page.getByRole('switch', { name: 'Hands-free' })
    await expect(toggle).toBeEnabled({ timeout: 30_000 })
    await expect(page.getByTestId('hands-free-notice')).toHaveCount(0)
    await toggle.click() // checked once the server took it
    await expect(toggle).toBeChecked()
    await expect(page.getByTestId('hands-free-notice')).toHaveText(
      "Alicia answers only when you start with 'Alicia'. Anything else you say is neither answered nor stored.",
    )
    await axe(page, 'voice-handsfree')

    // The interruption (said later than the question, which may have come
    // before the toggle took effect) is heard, said not addressed, and
    // never becomes a message.
    const notAddressedAfter = async () => {
      const starts = await events(page, 'user-speech-start')
      const interruptStart = starts.find((e) => e.at > (starts[0]?.at ?? 0) + 3000)
      if (!interruptStart) return false
      return (await events(page, 'not-addressed')).some((e) => e.at > interruptStart.at)
    }
    await expect.poll(notAddressedAfter, { timeout: at.interrupt + at.interruptLength + 30_000 }).toBe(true)
    await expect(page.getByTestId('not-addressed')).toHaveText('Not addressed to Alicia: not answered, not stored.')
    await shot(page, 'voice-handsfree')
    await expect(userMessages(page).filter({ hasText: interruption })).toHaveCount(0)
    if ((await events(page, 'not-addressed')).length >= 2) await expect(userMessages(page)).toHaveCount(0) // the question too

    // A reload keeps the conversation's mode.
    await page.getByRole('button', { name: 'End voice' }).click()
    await page.reload()
    await page.getByRole('button', { name: 'Talk to Alicia' }).click()
    await expect(page.getByRole('switch', { name: 'Hands-free' })).toBeChecked({ timeout: 30_000 })
    await page.getByRole('button', { name: 'End voice' }).click()
  })
}
