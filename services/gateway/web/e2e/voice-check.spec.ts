/// <reference lib="dom" />
// What prevents voice, said on the page (src/voice/preflight.ts): pressing
// Voice where the browser gives the page no microphone shows the sentence
// and its fix by the button, and the settings' voice check shows the same,
// without an uncaught exception and without making a conversation.
//
// The stack serves the page at 127.0.0.1, which browsers count as secure,
// so the page is made to look as it does over plain http from another host
// (no secure context, no navigator.mediaDevices) before its scripts run.
import { expect, test, type Page } from '@playwright/test'
import { signIn, stack } from './fixtures'

async function insecure(page: Page): Promise<string[]> {
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  await page.addInitScript(() => {
    Object.defineProperty(window, 'isSecureContext', { configurable: true, get: () => false })
    Object.defineProperty(Navigator.prototype, 'mediaDevices', { configurable: true, get: () => undefined })
  })
  return errors
}

test('Voice on an insecure page says it needs https and where to get it', async ({ page }) => {
  const errors = await insecure(page)
  await signIn(page, stack.bobKey)
  expect(await page.evaluate(() => [window.isSecureContext, navigator.mediaDevices === undefined])).toEqual([false, true])
  await page.getByRole('button', { name: 'Talk to Alicia' }).click()
  const problem = page.locator('[data-voice-problem="insecure-origin"]')
  await expect(problem).toBeVisible()
  await expect(problem).toHaveAttribute('role', 'alert')
  await expect(problem).toContainText('Voice needs a secure page')
  await expect(problem).toContainText(`https://${new URL(stack.base).hostname}:8443`)
  await expect(problem.getByRole('link', { name: '/ca' })).toHaveAttribute('href', '/ca')
  // Nothing was made for it: still the home screen, no voice session.
  expect(new URL(page.url()).pathname).toBe('/')
  await expect(page.getByTestId('voice-state')).toHaveCount(0)
  await page.getByTestId('voice-problem').getByRole('button', { name: 'Dismiss' }).click()
  await expect(problem).toHaveCount(0)
  expect(errors).toEqual([])
})

test("the settings' voice check says the same, and its connection test too", async ({ page }) => {
  const errors = await insecure(page)
  await signIn(page, stack.bobKey, '/settings')
  const check = page.getByRole('list', { name: 'Voice check' })
  await expect(check.getByTestId('voice-check-origin')).toContainText('Secure page: no')
  await expect(page.locator('[data-voice-problem="insecure-origin"]')).toBeVisible()
  await page.getByRole('button', { name: 'Test the connection' }).click()
  await expect(page.getByTestId('voice-test-microphone')).toHaveAttribute('data-result', 'failed')
  // Said once, not once per check.
  await expect(page.locator('[data-voice-problem="insecure-origin"]')).toHaveCount(1)
  expect(errors).toEqual([])
})

test('on the secure page the voice check finds the page secure', async ({ page }) => {
  await signIn(page, stack.bobKey, '/settings')
  const check = page.getByRole('list', { name: 'Voice check' })
  await expect(check.getByTestId('voice-check-origin')).toContainText('Secure page: yes')
  await expect(page.locator('[data-voice-problem="insecure-origin"]')).toHaveCount(0)
  // The stack runs no speech recognition (settings.spec.ts): the check says so.
  await expect(check.getByTestId('voice-check-backends')).toContainText('Speech recognition is not answering yet')
})
