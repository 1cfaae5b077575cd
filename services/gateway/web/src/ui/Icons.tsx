// Inline icons (no icon font: the CSP allows only the app's own files).
import type { SVGProps } from 'react'

function Icon(props: SVGProps<SVGSVGElement> & { d: string }) {
  const { d, ...rest } = props
  return (
    <svg viewBox="0 0 24 24" width="18" height="18" fill="none" stroke="currentColor" strokeWidth="2" strokeLinecap="round" strokeLinejoin="round" aria-hidden="true" {...rest}>
      <path d={d} />
    </svg>
  )
}

export const IconPlus = () => <Icon d="M12 5v14M5 12h14" />
export const IconStop = () => <Icon d="M7 7h10v10H7z" />
export const IconSend = () => <Icon d="M5 12h14M13 6l6 6-6 6" />
export const IconUp = () => <Icon d="M7 10l5-5 5 5M12 5v14" />
export const IconDown = () => <Icon d="M7 14l5 5 5-5M12 19V5" />
export const IconRefresh = () => <Icon d="M20 11a8 8 0 1 0-2.3 5.7M20 5v6h-6" />
export const IconEdit = () => <Icon d="M4 20h4L19 9l-4-4L4 16v4z" />
export const IconMenu = () => <Icon d="M4 6h16M4 12h16M4 18h16" />
export const IconClose = () => <Icon d="M6 6l12 12M18 6L6 18" />
export const IconChevronLeft = () => <Icon d="M15 6l-6 6 6 6" />
export const IconChevronRight = () => <Icon d="M9 6l6 6-6 6" />
export const IconNote = () => <Icon d="M5 4h14v12l-4 4H5zM15 16v4M9 9h6M9 13h4" />
export const IconArrowRight = () => <Icon d="M5 12h14M13 6l6 6-6 6" />
