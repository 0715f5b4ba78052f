/**
 * Builds the console into dist/console: two entries that share only React.
 * index.html (landing and run pages) must stay light: it never imports the
 * playground's editor. Everything is bundled; nothing loads from another host.
 */
import { resolve } from 'node:path';
import { defineConfig } from 'vite';

const root = import.meta.dirname;

export default defineConfig({
  root,
  base: '/',
  publicDir: false,
  logLevel: 'warn',
  // React's automatic JSX runtime through Vite's own transform (no Babel plugin needed).
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: resolve(root, '../dist/console'),
    emptyOutDir: true,
    assetsDir: 'assets',
    // Fonts and icons are inlined or emitted as files; either way they come from this server.
    assetsInlineLimit: 4096,
    chunkSizeWarningLimit: 6000,
    reportCompressedSize: false,
    rollupOptions: {
      input: {
        index: resolve(root, 'index.html'),
        playground: resolve(root, 'playground.html'),
      },
      // Libraries written for React Server Components mark files "use client"; meaningless in a browser bundle.
      onwarn(warning, warn) {
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
  },
  worker: { format: 'es' },
});
