// The benchmark's per-update accounting (trace.mjs) on a hand-built trace: no browser needed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { perUpdate } from "./trace.mjs";

const MAIN = { pid: 1, tid: 1 };
const task = (ts, dur, tdur, children = []) => [
  { ...MAIN, ph: "X", name: "ThreadControllerImpl::RunTask", ts, dur, tdur },
  { ...MAIN, ph: "X", name: "ThreadControllerImpl::RunTask", ts, dur, tdur }, // the same task traced twice
  ...children.map(([name, at, d]) => ({ ...MAIN, ph: "X", name, ts: at, dur: d })),
];

test("every main-thread task between two updates is charged to the first, counted once", () => {
  const events = [
    { ...MAIN, ph: "M", name: "thread_name", args: { name: "CrRendererMain" } },
    { pid: 1, tid: 2, ph: "M", name: "thread_name", args: { name: "Compositor" } },
    { ...MAIN, ph: "b", name: "live-update", ts: 1_000 },
    ...task(1_000, 3_000, 2_500, [["FunctionCall", 1_100, 2_500]]),
    ...task(5_000, 12_000, 6_000, [["Layout", 5_100, 4_000], ["Paint", 9_500, 2_000], ["MajorGC", 12_000, 1_000]]),
    { pid: 1, tid: 2, ph: "X", name: "ThreadControllerImpl::RunTask", ts: 6_000, dur: 50_000 }, // not main
    { ...MAIN, ph: "b", name: "live-update", ts: 1_001_000 },
    ...task(1_001_000, 2_000, 2_000, [["FunctionCall", 1_001_100, 1_500]]),
    { ...MAIN, ph: "b", name: "live-update", ts: 2_001_000 },
  ];
  const updates = perUpdate({ traceEvents: events }, "live-update");
  assert.equal(updates.length, 2);
  assert.deepEqual(updates[0], { wall: 15, cpu: 8.5, script: 2.5, style_layout: 4, paint: 2, gc: 1 });
  assert.deepEqual(updates[1], { wall: 2, cpu: 2, script: 1.5, style_layout: 0, paint: 0, gc: 0 });
});

test("a trace without the renderer's main thread is refused", () => {
  assert.throws(() => perUpdate([], "live-update"), /no renderer main thread/);
});
