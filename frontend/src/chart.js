// A uPlot time chart as a preact component: created once, fed new data on every render,
// resized with its container. Colours come from the page's CSS variables (light/dark).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from './ui.js';

const PALETTE = ['#2563eb', '#16a34a', '#dc2626', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];

function cssVar(name, fallback) {
  const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return value || fallback;
}

/** A tick value in a few characters: 950, 1.2k, 35k, 4.1M. */
function compact(value) {
  const size = Math.abs(value);
  if (size >= 1e6) return `${(value / 1e6).toFixed(size >= 1e7 ? 0 : 1)}M`;
  if (size >= 1e3) return `${(value / 1e3).toFixed(size >= 1e4 ? 0 : 1)}k`;
  return String(Number(value.toFixed(2)));
}

/** A unix time as the local wall clock, HH:MM:SS (one line: uPlot's default adds dates). */
function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

function options(width, series, unit) {
  const text = cssVar('--muted', '#666');
  const grid = cssVar('--border', '#ddd');
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  return {
    width,
    height: 180,
    padding: [8, 24, 0, 0],
    legend: { show: true, live: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true } },
    axes: [
      { ...axis, space: 80, values: (_u, ticks) => ticks.map(clock) },
      { ...axis, size: 56, values: (_u, ticks) => ticks.map((v) => `${compact(v)}${unit || ''}`) },
    ],
    series: [
      {},
      ...series.map((s, i) => ({
        label: s.label,
        stroke: PALETTE[i % PALETTE.length],
        width: 2,
        spanGaps: false,
        points: { show: false },
      })),
    ],
  };
}

/**
 * A chart titled `title` of `series` ([{label, values}], each as long as `t`, unix seconds)
 * with `unit` after the y values; `testid` names the figure for tests.
 */
export function Chart({ title, t, series, unit, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  const shape = series.map((s) => s.label).join('|');
  const data = [t || [], ...series.map((s) => s.values || [])];
  const latest = useRef(data);
  latest.current = data;

  useEffect(() => {
    const element = box.current;
    const width = Math.max(240, element.clientWidth);
    plot.current = new uPlot(options(width, series, unit), data, element);
    const observer = new ResizeObserver(() => {
      const w = Math.max(240, element.clientWidth);
      if (plot.current && Math.abs(plot.current.width - w) > 2) {
        plot.current.setSize({ width: w, height: 180 });
      }
    });
    observer.observe(element);
    const themeWatch = new MutationObserver(() => {
      plot.current.destroy();
      const w = Math.max(240, element.clientWidth);
      plot.current = new uPlot(options(w, series, unit), latest.current, element);
    });
    themeWatch.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    return () => {
      observer.disconnect();
      themeWatch.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [shape, unit]);

  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  });

  return html`<figure class="chart" data-testid=${testid}>
    <figcaption>${title}</figcaption>
    <div ref=${box} class="chart-box"></div>
  </figure>`;
}
