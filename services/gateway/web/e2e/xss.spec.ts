/// <reference lib="dom" />
// A model's HTML and javascript: links render as inert text; so do titles
// and messages with markup.
import { expect, test } from '@playwright/test'
import { body, completed, lastAnswer, newChat, say, signIn, stack, userMessages } from './fixtures'

test('HTML and javascript: links from the model are inert text', async ({ page }) => {
  const dialogs: string[] = []
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  await signIn(page, stack.aliceKey)
  await newChat(page, say.html)
  const answer = body(await completed(lastAnswer(page)))
  // The tag is shown as the text it is, not made an element.
  await expect(answer).toContainText('<img src=x onerror="window.__xss=1">')
  await expect(answer.locator('img')).toHaveCount(0)
  await expect(page.locator('img[src="x"]')).toHaveCount(0)
  // The link keeps its text; its javascript: target is gone.
  const link = answer.getByText('this link')
  await expect(link).toBeVisible()
  for (const a of await answer.locator('a').all()) {
    expect((await a.getAttribute('href')) ?? '').not.toMatch(/^\s*javascript:/i)
  }
  // Following it runs nothing (at most it opens the page again).
  const popup = page.waitForEvent('popup', { timeout: 3000 }).catch(() => null)
  await link.click()
  await (await popup)?.close()
  expect(await page.evaluate(() => window.__xss)).toBeUndefined()

  // The same after a reload (the stored text).
  await page.reload()
  const stored = body(await completed(lastAnswer(page)))
  await expect(stored).toContainText('<img src=x onerror="window.__xss=1">')
  await expect(stored.locator('img')).toHaveCount(0)
  expect(await page.evaluate(() => window.__xss)).toBeUndefined()
  expect(dialogs).toEqual([])
})

test('markup in a message and a title is text', async ({ page }) => {
  await signIn(page, stack.aliceKey)
  // Short enough to be the whole title (longer first messages are cut).
  const markup = '<img src=y onerror="window.__xss=2"><script>x()</script>'
  await newChat(page, markup)
  await completed(lastAnswer(page))
  await expect(userMessages(page).first()).toContainText(markup)
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(markup)
  await expect(page.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: markup })).toBeVisible()
  await expect(page.locator('img[src="y"]')).toHaveCount(0)
  await page.reload()
  await expect(userMessages(page).first()).toContainText(markup)
  expect(await page.evaluate(() => window.__xss)).toBeUndefined()
})
