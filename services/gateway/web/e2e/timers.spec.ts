/// <reference lib="dom" />
// Timers and reminders: set by the assistant's tools in conversation,
// listed in the sidebar with a cancel button, and, when one fires, its
// message in the conversation with a toast and a system notification.
import { expect, test } from '@playwright/test'
import { answers, api, ask, axe, completed, DESKTOP, json, lastAnswer, newChat, PHONE, shot, signIn, stack } from './fixtures'

// Phrases the fake model answers with the timer tools (model_test.go).
const setTea = 'Set a tea timer for four seconds'
const waterPlants = 'Remind me to water the plants in an hour'

declare global {
  interface Window {
    __notifications?: string[]
  }
}

test('a timer set in conversation fires with a toast and a notification; a reminder is cancelled from the list', async ({ page }) => {
  // Notifications allowed, and recorded: the page's Notification is a stand-in.
  await page.addInitScript(() => {
    window.__notifications = []
    class FakeNotification {
      static permission = 'granted'
      static requestPermission = async () => 'granted'
      constructor(_title: string, opts?: { body?: string }) {
        window.__notifications!.push(opts?.body ?? '')
      }
    }
    Object.defineProperty(window, 'Notification', { value: FakeNotification, configurable: true })
  })
  await page.setViewportSize(DESKTOP)
  await signIn(page, stack.aliceKey, '/')
  await newChat(page, waterPlants)
  await expect(body(lastAnswer(page))).toContainText('I will remind you in an hour.', { timeout: 20_000 })
  await completed(lastAnswer(page))

  // The list shows the reminder once read again (a reload reads it at once).
  await page.reload()
  const list = page.getByRole('list', { name: 'Timers and reminders' })
  await expect(list.getByText('water the plants')).toBeVisible()
  await expect(list.getByRole('button', { name: /Cancel reminder water the plants/ })).toBeVisible()

  // A timer due in four seconds: its message comes into the conversation,
  // with a toast and a notification.
  const before = await answers(page).count()
  await ask(page, setTea)
  await expect(lastAnswer(page)).toContainText('Your tea timer is set')
  const toast = page.getByRole('status').filter({ hasText: 'Your 4-second timer for tea is done.' })
  await expect(toast).toBeVisible({ timeout: 20_000 })
  await expect(answers(page)).toHaveCount(before + 2)
  await expect(lastAnswer(page)).toContainText('Your 4-second timer for tea is done.')
  expect(await page.evaluate(() => window.__notifications)).toEqual(['Your 4-second timer for tea is done.'])
  await expect(list.getByText('tea: done')).toBeVisible()
  await axe(page, 'timers')
  await shot(page, 'timers')

  // Cancelled from the list: stored as cancelled, never delivered.
  await list.getByRole('button', { name: /Cancel reminder water the plants/ }).click()
  await expect(list.getByText('water the plants: cancelled')).toBeVisible()
  const alice = await api(stack.aliceKey)
  const timers = await json<{ timers: { label: string; status: string }[] }>(await alice.get('/v1/timers'))
  expect(timers.timers.filter((t) => t.label === 'water the plants').map((t) => t.status)).toContain('cancelled')
  expect(timers.timers.find((t) => t.label === 'tea')?.status).toBe('fired')
  await alice.dispose()

  // On a phone the list is in the menu.
  await toast.getByRole('button', { name: 'Dismiss' }).click()
  await page.setViewportSize(PHONE)
  await page.getByRole('button', { name: 'Open menu' }).click()
  await expect(page.getByRole('dialog', { name: 'Menu' }).getByText('tea: done')).toBeVisible()
  await shot(page, 'timers')
})

const body = (message: ReturnType<typeof lastAnswer>) => message.locator('.prose-alicia')
