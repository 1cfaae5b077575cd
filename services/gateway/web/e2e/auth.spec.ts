/// <reference lib="dom" />
// Sign in with an API key; the key ends up nowhere in the browser.
import { expect, test } from '@playwright/test'
import { stack } from './fixtures'

test('sign in with the key, which the page does not keep, and sign out', async ({ page, context }) => {
  const urls: string[] = []
  page.on('request', (r) => urls.push(r.url()))
  await page.goto('/')
  await expect(page.getByRole('heading', { name: 'Sign in to Alicia' })).toBeVisible()

  // A wrong key is refused and said so.
  await page.getByLabel('API key').fill('not-a-key-0123456789')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await expect(page.getByRole('alert')).toContainText('not valid')

  await page.getByLabel('API key').fill(stack.aliceKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await expect(page.getByRole('navigation', { name: 'Conversations' })).toBeVisible()
  await expect(page.getByText('alice (admin)')).toBeVisible()

  // The key is in no storage, URL or cookie; the session cookie is HttpOnly and SameSite=Strict.
  const storage = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie)
  expect(storage).not.toContain(stack.aliceKey)
  expect(page.url()).not.toContain(stack.aliceKey)
  for (const u of urls) expect(u).not.toContain(stack.aliceKey)
  const cookies = await context.cookies()
  expect(cookies.length).toBeGreaterThan(0)
  for (const c of cookies) {
    expect(c.value).not.toContain(stack.aliceKey)
    expect(c.httpOnly, `cookie ${c.name} HttpOnly`).toBe(true)
    expect(c.sameSite).toBe('Strict')
  }
  // Nor is it in the page's memory of the form.
  await expect(page.getByLabel('API key')).toHaveCount(0)

  // A reload keeps the session.
  await page.reload()
  await expect(page.getByText('alice (admin)')).toBeVisible()

  await page.getByRole('button', { name: 'Sign out' }).click()
  await expect(page.getByRole('heading', { name: 'Sign in to Alicia' })).toBeVisible()
  expect((await page.request.get('/v1/session')).status()).toBe(401)
  await page.reload()
  await expect(page.getByRole('heading', { name: 'Sign in to Alicia' })).toBeVisible()
})

test('bob is no administrator', async ({ page }) => {
  await page.goto('/')
  await page.getByLabel('API key').fill(stack.bobKey)
  await page.getByLabel('API key').press('Enter')
  await expect(page.getByText('bob', { exact: true })).toBeVisible()
  await expect(page.getByText('(admin)')).toHaveCount(0)
})
