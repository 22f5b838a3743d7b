import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Builds dist/ when src/ changed: test/streaming runs the CLI in a child process.
    globalSetup: ["test/support/build-dist.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
