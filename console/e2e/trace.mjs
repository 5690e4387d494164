// Main-thread time per live update from a Chromium trace (the DevTools performance recording): every task the
// page's main thread ran between one `live-update` measure's start and the next — the samples event's handling,
// then the style, layout and paint of the frame it caused, timers, garbage collection — is charged to that
// update. performance.measure alone sees the handler and its microtasks, not the frame that follows.

/**
 * Categories for browser.startTracing: top-level tasks, the page's user timings, and what tasks spent on
 * (DevTools' timeline events, GC included). Not "v8": its per-call events are tracing overhead the page
 * would not pay, and nothing below reads them.
 */
export const CATEGORIES = ["toplevel", "blink.user_timing", "devtools.timeline", "disabled-by-default-devtools.timeline"];

const BREAKDOWN = {
  script: ["FunctionCall", "EvaluateScript", "TimerFire", "FireAnimationFrame"],
  style_layout: ["UpdateLayoutTree", "Layout"],
  paint: ["PrePaint", "Paint", "Layerize", "Commit", "UpdateLayer"],
  gc: ["MinorGC", "MajorGC"],
};

/**
 * Per update: `wall` (ms the main thread was busy), `cpu` (its thread time) and the busy time by kind.
 * `measure` names the page's per-update performance measure.
 */
export function perUpdate(trace, measure) {
  const events = Array.isArray(trace) ? trace : trace.traceEvents;
  const main = events.find((e) => e.ph === "M" && e.name === "thread_name" && e.args?.name === "CrRendererMain");
  if (!main) throw new Error("the trace has no renderer main thread");
  const onMain = events.filter((e) => e.pid === main.pid && e.tid === main.tid);
  // A measure is an async span: its begin event carries the measure's start.
  const starts = onMain.filter((e) => e.name === measure && e.ph === "b").map((e) => e.ts).sort((a, b) => a - b);
  const tasks = outermost(onMain.filter((e) => e.ph === "X" && e.name === "ThreadControllerImpl::RunTask"));
  const parts = onMain.filter((e) => e.ph === "X" && Object.values(BREAKDOWN).some((names) => names.includes(e.name)));
  const updates = [];
  for (let i = 0; i + 1 < starts.length; i++) {
    const [from, to] = [starts[i], starts[i + 1]];
    const mine = tasks.filter((t) => t.ts >= from && t.ts < to);
    const kinds = {};
    for (const [kind, names] of Object.entries(BREAKDOWN)) {
      kinds[kind] = outermost(parts.filter((e) => names.includes(e.name) && e.ts >= from && e.ts < to)).reduce((s, e) => s + e.dur, 0) / 1000;
    }
    updates.push({
      wall: mine.reduce((s, t) => s + t.dur, 0) / 1000,
      cpu: mine.reduce((s, t) => s + (t.tdur ?? t.dur), 0) / 1000,
      ...kinds,
    });
  }
  return updates;
}

/** The events not nested inside another of the list (one task can be traced at two levels). */
function outermost(list) {
  const sorted = [...list].sort((a, b) => a.ts - b.ts || b.dur - a.dur);
  const out = [];
  let end = -Infinity;
  for (const e of sorted) {
    if (e.ts >= end) {
      out.push(e);
      end = e.ts + e.dur;
    }
  }
  return out;
}
