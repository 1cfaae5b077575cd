/// <reference lib="dom" />
// The connection indicator, and a reconnect forced by the server (the
// gateway restarts) in the middle of an answer: the answer completes with
// no sentence lost or shown twice.
import { expect, test } from '@playwright/test'
import { body, completed, connected, control, lastAnswer, newChat, say, signIn, stack, story } from './fixtures'

test('the gateway restarts mid-answer: the page reconnects and the answer completes whole', async ({ page }) => {
  // Every status the indicator takes and every text the answer shows, as they happen.
  await page.addInitScript(() => {
    const statuses: string[] = []
    const texts: string[] = []
    Object.assign(window, { __statuses: statuses, __texts: texts })
    new MutationObserver(() => {
      const s = document.querySelector('[data-testid="connection"]')?.getAttribute('data-status')
      if (s && statuses[statuses.length - 1] !== s) statuses.push(s)
      const all = document.querySelectorAll('article[data-role="assistant"]')
      const t = (all[all.length - 1]?.querySelector('.prose-alicia')?.textContent ?? '').replace(/\s+/g, ' ').trim()
      if (t && texts[texts.length - 1] !== t) texts.push(t)
    }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true })
  })
  await signIn(page, stack.aliceKey)
  await newChat(page, say.longStory)
  await connected(page)
  const badge = page.getByTestId('connection')
  await expect(badge).toHaveText(/Connected/)
  const answer = lastAnswer(page)
  await expect(answer).toContainText('Sentence 3 of the story.')
  await expect(answer).toHaveAttribute('data-status', 'streaming')

  await control('/restart-gateway')
  const full = story(30)
  await expect(body(answer)).toHaveText(full, { timeout: 30_000 })
  await completed(answer)
  await connected(page)

  const statuses = await page.evaluate(() => (window as unknown as { __statuses: string[] }).__statuses)
  expect(statuses, 'the indicator showed the reconnect').toContain('reconnecting')
  expect(statuses.at(-1)).toBe('open')
  // At no moment was a sentence missing before a later one, or shown twice.
  const texts = await page.evaluate(() => (window as unknown as { __texts: string[] }).__texts)
  for (const t of texts) expect(full.startsWith(t), `shown: ${t}`).toBe(true)
  expect(texts.length).toBeGreaterThan(5)

  // What was stored is the same.
  await page.reload()
  await expect(body(await completed(lastAnswer(page)))).toHaveText(full)
})

test('offline and back: the indicator says so and the page reconnects', async ({ page, context }) => {
  await signIn(page, stack.aliceKey)
  await newChat(page, 'Hello before going offline')
  await completed(lastAnswer(page))
  await connected(page)
  await context.setOffline(true)
  await expect(page.getByTestId('connection')).toHaveAttribute('data-status', 'offline')
  await expect(page.getByTestId('connection')).toHaveText(/Offline/)
  await context.setOffline(false)
  await connected(page, 30_000)
})
