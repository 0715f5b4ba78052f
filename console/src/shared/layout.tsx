import type { ReactNode } from 'react';
import { signOut } from './sign-in';

const LINKS = [
  { href: '/runs', label: 'Runs' },
  { href: '/runs/new', label: 'New run' },
  { href: '/tasks', label: 'Tasks' },
  { href: '/usage', label: 'Usage' },
  { href: '/chat', label: 'Chat' },
  { href: '/playground', label: 'Playground' },
];

export function Layout({ children }: { children: ReactNode }) {
  const here = window.location.pathname;
  return (
    <>
      <header className="top">
        <a className="brand" href="/">
          promptwire
        </a>
        <nav>
          {LINKS.map((link) => (
            <a key={link.href} href={link.href} aria-current={here === link.href ? 'page' : undefined}>
              {link.label}
            </a>
          ))}
        </nav>
        <button type="button" className="link" data-action="sign-out" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main className="page">{children}</main>
    </>
  );
}
