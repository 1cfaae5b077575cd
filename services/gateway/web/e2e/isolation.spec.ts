// Another user's conversation URL shows "not yours" and nothing of it.
import { expect, test } from '@playwright/test'
import { ask, completed, lastAnswer, newChat, signIn, stack } from './fixtures'

test("bob opening alice's conversation sees that it is not his, and nothing of it", async ({ page, browser }) => {
  await signIn(page, stack.aliceKey)
  const secret = 'The vault code is swordfish'
  const id = await newChat(page, secret)
  await completed(lastAnswer(page))
  await ask(page, 'And the spare key is under the mat')

  const bobContext = await browser.newContext()
  const bob = await bobContext.newPage()
  const bodies: string[] = []
  bob.on('response', async (r) => {
    if (r.url().includes('/v1/')) bodies.push(await r.text().catch(() => ''))
  })
  const frames: string[] = []
  bob.on('websocket', (ws) => ws.on('framereceived', (f) => frames.push(typeof f.payload === 'string' ? f.payload : f.payload.toString('latin1'))))
  await signIn(bob, stack.bobKey, `/c/${id}`)
  await expect(bob.getByRole('heading', { name: 'This conversation is not yours' })).toBeVisible()
  await expect(bob.locator('article')).toHaveCount(0)
  for (const leak of ['swordfish', 'spare key', 'This is answer']) {
    await expect(bob.locator('body')).not.toContainText(leak)
    for (const b of bodies) expect(b).not.toContain(leak)
    for (const f of frames) expect(f).not.toContain(leak)
  }
  await expect(bob.getByRole('navigation', { name: 'Conversations' }).getByRole('link', { name: secret })).toHaveCount(0)
  await bobContext.close()
})
