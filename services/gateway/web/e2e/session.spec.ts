// A session that ends while the page is open (signed out in another tab):
// the WebSocket cannot reconnect, and the page says so and shows the
// sign-in instead of retrying forever.
import { expect, test } from '@playwright/test'
import { connected, control, newChat, signIn, stack } from './fixtures'

test('a session ended elsewhere brings back the sign-in', async ({ page }) => {
  await signIn(page, stack.aliceKey)
  await newChat(page, 'Hello before my session ends')
  await connected(page)
  // Another tab of the same browser signs out: the cookie is gone for both.
  const other = await page.context().newPage()
  await other.goto(stack.base + '/')
  const status = await other.evaluate(async () => (await fetch('/v1/session', { method: 'DELETE' })).status)
  expect(status).toBe(204)
  await other.close()
  // The server drops the connection; the reconnect is refused.
  await control('/restart-gateway')
  await expect(page.getByRole('heading', { name: 'Sign in to Alicia' })).toBeVisible({ timeout: 20_000 })
  await expect(page.getByText('Your session has ended. Sign in again.')).toBeVisible()
})
