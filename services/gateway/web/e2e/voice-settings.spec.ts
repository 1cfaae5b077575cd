// Voice and language on the settings page (issue 30, item 2): a person picks
// the voice answers are spoken in (server-info's voices: the fake speech
// server lists a few of Kokoro's), the speaking rate, the language and the
// time zone (the browser's by default), and hands-free mode by default; saved as their UserSettings and
// read back after a reload. bob's settings: reset at the end.
import { expect, test } from '@playwright/test'
import { axe, DESKTOP, PHONE, shot, signIn, stack } from './fixtures'

// One person's settings: the two sizes one after the other.
test.describe.configure({ mode: 'serial' })

for (const size of [DESKTOP, PHONE]) {
  test(`a person's voice, rate, language and time zone at ${size.width}px`, async ({ page }) => {
    await page.setViewportSize(size)
    await signIn(page, stack.bobKey, '/settings')
    const form = page.getByTestId('voice-language')
    await expect(form.getByRole('heading', { name: 'Voice and language' })).toBeVisible()
    const voice = form.getByLabel('Voice')
    await expect(voice).toBeEnabled()
    // The browser's zone until one is saved.
    const zone = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone)
    await expect(form.getByLabel('Time zone')).toHaveValue(zone)
    await expect(voice.locator('option', { hasText: 'Emma' })).toHaveCount(1)

    await voice.selectOption('bf_emma')
    await form.getByLabel(/Speaking rate/).fill('1.25')
    await expect(form.getByTestId('rate-value')).toHaveText('1.25×')
    await form.getByLabel('Language').selectOption('fr-FR')
    await form.getByLabel('Time zone').selectOption('Europe/Paris')
    await expect(form.getByTestId('handsfree-default')).not.toBeChecked()
    await form.getByLabel('Hands-free by default').check()
    await form.getByRole('button', { name: 'Save' }).click()
    await expect(form.getByRole('status')).toHaveText('Saved: applies from the next sentence.')
    await form.scrollIntoViewIfNeeded()
    await axe(page, 'settings-voice')
    await shot(page, 'settings-voice')

    await page.reload()
    await expect(form.getByLabel('Voice')).toHaveValue('bf_emma')
    await expect(form.getByTestId('rate-value')).toHaveText('1.25×')
    await expect(form.getByLabel('Language')).toHaveValue('fr-FR')
    await expect(form.getByLabel('Time zone')).toHaveValue('Europe/Paris')
    await expect(form.getByTestId('handsfree-default')).toBeChecked()
    expect(await page.evaluate(async () => (await (await fetch('/v1/settings', { credentials: 'same-origin' })).json()).wakeWord)).toBe(true)

    // An unknown voice is refused by the server, whatever the page offers.
    const put = (body: unknown) => page.evaluate(async (b) => (await fetch('/v1/settings', {
      method: 'PUT', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b),
    })).status, body)
    expect(await put({ voice: 'nobody' })).toBe(400)
    expect(await put({})).toBe(200)
  })
}
