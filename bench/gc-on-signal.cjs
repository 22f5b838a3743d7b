// Preloaded into a benchmark's server (`node --expose-gc --require bench/gc-on-signal.cjs ...`):
// on SIGUSR2 it runs a full garbage collection and writes the process's memory figures, as one
// JSON line, to the file named by TROVE_BENCH_MEMORY_FILE. The server's own code is not changed;
// bench/parked-polls.js uses it to measure memory after a GC rather than with garbage in it.
const { writeFileSync } = require("node:fs");

const file = process.env.TROVE_BENCH_MEMORY_FILE;
if (file && typeof global.gc === "function") {
  process.on("SIGUSR2", () => {
    global.gc();
    global.gc();
    const m = process.memoryUsage();
    writeFileSync(file, `${JSON.stringify({ ...m, at: Date.now() })}\n`);
  });
}
