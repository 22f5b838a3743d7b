// Builds the console into dist/console/, which the server serves under /console/ (src/server/console.ts).
// Preact's JSX through esbuild's automatic runtime; no plugin, no CDN: every asset is in the bundle.

import { defineConfig } from "vite";

export default defineConfig({
  base: "/console/",
  publicDir: false,
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "../dist/console",
    emptyOutDir: true,
    target: "es2022",
    // Under the CSP (style-src 'self', no inline script), nothing may be inlined as a data: module.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
