import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["js/__tests__/**/*.test.ts"],
    environment: "jsdom",
    setupFiles: ["js/__tests__/setup.ts"],
    pool: "threads",
    maxWorkers: 1,
    // jsdom + CodeMirror + plotly take seconds per test on a loaded 2-core machine; a test that
    // hangs still fails, just not at the 5 s default.
    testTimeout: 30000,
  },
});
