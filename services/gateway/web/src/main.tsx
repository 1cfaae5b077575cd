import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import './index.css'
import { App } from './components/App'
import { OfflineBanner } from './components/OfflineBanner'
import { prefetch } from './prefetch'
import { registerServiceWorker } from './pwa'

if (window.matchMedia?.('(prefers-color-scheme: dark)').matches) document.documentElement.classList.add('dark')

prefetch()
registerServiceWorker()

const root = document.getElementById('root')
if (root)
  createRoot(root).render(
    <StrictMode>
      <App />
      <OfflineBanner />
    </StrictMode>,
  )
