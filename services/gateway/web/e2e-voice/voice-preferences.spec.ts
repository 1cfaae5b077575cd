/// <reference lib="dom" />
// This conversation's voice, rate and language in the voice panel (issue
// 30, item 2): chosen during a call, each is the conversation's own
// preference (PUT /v1/conversations/{id}/preferences) and what the panel
// shows after a reload; "Your default" goes back to the person's.
import { expect, test } from '@playwright/test'
import { axe, DESKTOP, PHONE, shot, signIn, stack } from '../e2e/fixtures'

// One person's settings: the two sizes one after the other.
test.describe.configure({ mode: 'serial' })

for (const size of [DESKTOP, PHONE]) {
  test(`a conversation's own voice, rate and language at ${size.width}px`, async ({ page }) => {
    await page.setViewportSize(size)
    await signIn(page, stack.bobKey)
    await page.getByRole('button', { name: 'Talk to Alicia' }).click()
    await page.waitForURL(/\/c\/[^/?]+/)
    const prefs = page.getByRole('group', { name: "This conversation's voice" })
    const voice = prefs.getByLabel('Voice')
    await expect(voice).toBeEnabled({ timeout: 30_000 })
    await expect(voice.locator('option').first()).toHaveText(/^Your default/)

    await voice.selectOption('bm_george')
    await expect(voice).toHaveValue('bm_george')
    await prefs.getByLabel('Rate').selectOption('1.1')
    await expect(prefs.getByLabel('Rate')).toHaveValue('1.1')
    await prefs.getByLabel('Language').selectOption('en-GB')
    await expect(prefs.getByLabel('Language')).toHaveValue('en-GB')
    const cid = page.url().split('/c/')[1]!.split(/[?#]/)[0]!
    const conv = await (await page.request.get(`/v1/conversations/${cid}`)).json() as { preferences: Record<string, unknown> }
    expect(conv.preferences).toMatchObject({ voice: 'bm_george', voiceFrom: 'conversation', speechSpeed: 1.1, language: 'en-GB', languageFrom: 'conversation' })
    await axe(page, 'voice-preferences')
    await shot(page, 'voice-preferences')

    // Back to the person's voice; the rate stays the conversation's.
    await voice.selectOption('')
    await expect(voice).toHaveValue('')
    await page.getByRole('button', { name: 'End voice' }).click()
    await page.reload()
    await page.getByRole('button', { name: 'Talk to Alicia' }).click()
    await expect(prefs.getByLabel('Rate')).toHaveValue('1.1', { timeout: 30_000 })
    await expect(prefs.getByLabel('Voice')).toHaveValue('')
    await page.getByRole('button', { name: 'End voice' }).click()
  })
}
