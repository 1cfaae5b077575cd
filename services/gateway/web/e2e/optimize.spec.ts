/// <reference lib="dom" />
// Improve Alicia: a run with too few answers fails and says why; weights
// set and kept; answers whose details name the prompt versions and the
// judge's scores; a run started with a budget, watched to its end, its
// elites compared with their example answers, one promoted (new answers use
// it and name it), then rolled back (new answers use the installation's
// again). carol is the only user here: her answers alone are learned from.
import { expect, test, type Page } from '@playwright/test'
import { ask, axe, brief, completed, DESKTOP, lastAnswer, newChat, PHONE, say, shot, signIn, stack } from './fixtures'

const questions = ['Is the rose pruned?', 'Are the tomatoes ripe?', 'Did the hedge grow?', 'Is the lawn dry?', 'Are the bees back?', 'Is the pond full?']

const versionsOf = (page: Page, component: string) => page.getByTestId(`versions-${component}`).getByTestId('version')

// details opens the Details of answer (after a reload: what the server
// stored) until what want finds is there (the judge comes after the answer).
async function details(page: Page, want: (d: ReturnType<Page['getByTestId']>) => Promise<void>) {
  await expect(async () => {
    await page.reload()
    const answer = await completed(lastAnswer(page))
    await answer.getByRole('button', { name: 'Details' }).click()
    await want(answer.getByTestId('answer-details'))
  }).toPass({ timeout: 30_000 })
}

test('weights, a run watched to its end, elites compared, promoted and rolled back', async ({ page }) => {
  test.setTimeout(180_000)
  await signIn(page, stack.carolKey, '/')
  await page.getByRole('link', { name: 'Improve Alicia' }).click()
  await expect(page).toHaveURL(/\/improve$/)
  await expect(page.getByRole('heading', { name: 'Improve Alicia' })).toBeVisible()
  // Not an administrator: no choice of scope.
  await expect(page.getByRole('radio', { name: /installation/ })).toHaveCount(0)
  await expect(page.getByText('No runs yet.')).toBeVisible()

  // Nothing to learn from yet: the run fails and the page says why.
  await page.getByRole('button', { name: 'Start a run' }).click()
  const run = page.getByTestId('run')
  await expect(run).toHaveAttribute('data-status', 'failed', { timeout: 30_000 })
  await expect(run.getByRole('alert')).toContainText('0 stored answers to learn from, 4 needed')

  // A budget that is no number of metric calls is refused in the page.
  await page.getByLabel('Budget (metric calls)').fill('0')
  await page.getByRole('button', { name: 'Start a run' }).click()
  await expect(page.getByText('The budget is between 1 and 100000 metric calls.')).toBeVisible()

  // The weights: brevity halved, speed not counted; kept.
  await page.getByLabel(/^Brevity/).focus()
  for (let i = 0; i < 10; i++) await page.keyboard.press('ArrowLeft')
  await page.getByLabel(/^Speed/).focus()
  await page.keyboard.press('Home')
  await expect(page.getByTestId('weight-brevity')).toHaveText('0.50')
  await page.getByRole('button', { name: 'Save weights' }).click()
  await expect(page.getByText('Saved: the next run weighs answers this way.')).toBeVisible()
  // The checkbox shows the server's answer: click, then wait for it.
  await page.getByLabel('Let installation-wide runs learn from my conversations').click()
  await expect(page.getByLabel('Let installation-wide runs learn from my conversations')).toBeChecked()
  await page.reload()
  await expect(page.getByTestId('weight-brevity')).toHaveText('0.50')
  await expect(page.getByTestId('weight-latency')).toHaveText('0.00')
  await expect(page.getByTestId('weight-correctness')).toHaveText('1.00')
  await expect(page.getByLabel('Let installation-wide runs learn from my conversations')).toBeChecked()

  // Answers to learn from, long-winded; each names the versions that made
  // it and, once judged, the judge's scores and rationale.
  await newChat(page, `${say.garden}: ${questions[0]}`)
  await completed(lastAnswer(page))
  for (const q of questions.slice(1)) await ask(page, `${say.garden}: ${q}`)
  await details(page, async (d) => {
    await expect(d.getByTestId('prompt-version').filter({ hasText: /^system v\d+$/ })).toHaveCount(1, { timeout: 1000 })
    await expect(d.getByTestId('judgement')).toContainText('relevancy 30 %', { timeout: 1000 })
    await expect(d.getByTestId('judgement')).toContainText(brief.tooLong)
  })
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size)
    await lastAnswer(page).getByTestId('answer-details').scrollIntoViewIfNeeded()
    await shot(page, 'answer-details')
  }
  await page.setViewportSize(DESKTOP)
  const seedSystem = await lastAnswer(page).getByTestId('prompt-version').filter({ hasText: /^system / }).getAttribute('title')

  // A run on the system prompt, watched: the budget spent, the front, the
  // best scores, to its end.
  await page.goto('/improve')
  await page.getByLabel('Voice style', { exact: true }).uncheck()
  await page.getByLabel('Budget (metric calls)').fill('60')
  await page.getByRole('button', { name: 'Start a run' }).click()
  await expect(run).not.toHaveAttribute('data-status', 'failed')
  await expect(page.getByTestId('run-progress')).toContainText('of 60 metric calls')
  await expect(run).toHaveAttribute('data-status', 'done', { timeout: 90_000 })
  await expect(run.getByTestId('run-status')).toHaveText('Done')
  await expect(run.getByRole('progressbar', { name: 'Metric calls spent' })).toBeVisible()
  await expect(page.getByRole('list', { name: 'Runs' }).getByRole('button')).toHaveCount(2)
  await expect(run.getByLabel('Best scores per dimension').getByTestId('score-relevancy')).toContainText('90 %')

  // The elites, side by side: the best asks for one sentence, and its
  // example answers are short where today's ramble.
  const best = run.getByTestId('elite').first()
  await expect(best.getByRole('heading', { name: /Candidate 1/ })).toBeVisible()
  await expect(best.getByTestId('score-relevancy')).toContainText('90 %')
  await expect(best.getByTestId('diff').locator('ins')).toContainText(brief.instruction)
  await expect(best.getByTestId('example').first().getByTestId('example-candidate')).toHaveText(brief.answer)
  await expect(best.getByTestId('example').first().getByTestId('example-current')).toContainText('let me tell you everything')
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size)
    await page.getByRole('heading', { name: 'Improve Alicia' }).scrollIntoViewIfNeeded()
    await axe(page, 'improve')
    await shot(page, 'improve')
    await best.scrollIntoViewIfNeeded()
    await shot(page, 'improve-elite')
  }
  await page.setViewportSize(DESKTOP)
  // Dark, as the system asks (the page picks it when it starts).
  await page.emulateMedia({ colorScheme: 'dark' })
  await page.reload()
  await expect(best.getByTestId('example-candidate').first()).toHaveText(brief.answer)
  await axe(page, 'improve (dark)')
  await best.scrollIntoViewIfNeeded()
  await shot(page, 'improve-elite-dark')
  await page.emulateMedia({ colorScheme: 'light' })
  await page.reload()

  // Promoted to all new conversations: carol's own system prompt serves.
  await best.getByRole('button', { name: 'Promote' }).click()
  await expect(best.getByRole('status')).toContainText('Promoted')
  await expect(run.getByRole('button', { name: 'Promote' })).toHaveCount(0)
  const mine = versionsOf(page, 'system')
  await expect(mine).toHaveCount(1)
  await expect(mine.first()).toHaveAttribute('data-status', 'active')
  await expect(mine.first()).toContainText('from a run')
  await expect(mine.first().getByTestId('vote-rate')).toHaveText('0 answers, no votes yet')
  const promoted = await mine.first().getAttribute('data-version-id')
  await page.getByTestId('versions-system').scrollIntoViewIfNeeded()
  await shot(page, 'improve-versions')

  // A new answer follows it (once the llm heard of it) and names it.
  await expect(async () => {
    await newChat(page, `${say.garden}: ${questions[0]}`)
    await expect(await completed(lastAnswer(page))).toContainText(brief.answer, { timeout: 1000 })
  }).toPass({ timeout: 30_000 })
  await details(page, async (d) => {
    await expect(d.getByTestId('prompt-version').filter({ hasText: /^system / })).toHaveAttribute('title', promoted!, { timeout: 1000 })
  })

  // Rolled back in one click: carol's version retired, the installation's
  // serves her again.
  await page.goto('/improve')
  await expect(mine.first()).toHaveAttribute('data-status', 'active')
  await expect(mine.first().getByTestId('vote-rate')).toHaveText('1 answer, no votes yet')
  await page.getByRole('button', { name: 'Roll back system prompt' }).click()
  await expect(mine.first()).toHaveAttribute('data-status', 'retired')
  await expect(page.getByRole('button', { name: 'Roll back system prompt' })).toBeDisabled()
  await expect(async () => {
    await newChat(page, `${say.garden}: ${questions[1]}`)
    await expect(await completed(lastAnswer(page))).toContainText('let me tell you everything', { timeout: 1000 })
  }).toPass({ timeout: 30_000 })
  await details(page, async (d) => {
    await expect(d.getByTestId('prompt-version').filter({ hasText: /^system / })).toHaveAttribute('title', seedSystem!, { timeout: 1000 })
  })
})

test("an administrator also improves the installation's prompts", async ({ page }) => {
  await signIn(page, stack.aliceKey, '/improve')
  await expect(page.getByRole('heading', { name: 'Improve Alicia' })).toBeVisible()
  await expect(versionsOf(page, 'system')).toHaveCount(0)
  await page.getByRole('radio', { name: "Everyone's (installation)" }).check()
  // The installation's own versions: the built-in prompt serves.
  const system = versionsOf(page, 'system')
  await expect(system.first()).toHaveAttribute('data-status', 'active')
  await expect(system.first()).toContainText('from the built-in prompt')
  await expect(page.getByTestId('versions-voice_style').getByTestId('version').first()).toHaveAttribute('data-status', 'active')
  await expect(page.getByText('No runs yet.')).toBeVisible()
})
