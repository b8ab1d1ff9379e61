// A player's rating under one rule set over their rated races, as a small inline SVG line
// (no chart library): the rating before the oldest race shown, then after each, oldest at the
// left and newest at the right, with an accessible title saying what it shows.
import { h } from "../dom.js";
import { t } from "../i18n.js";

const SVG = "http://www.w3.org/2000/svg";
/** The drawing's size in its own units (it scales to the width it is given). */
export const CHART = { width: 300, height: 80, pad: 6 };

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  for (const child of children) el.append(child);
  return el;
}

/**
 * The points of the line: x from the left pad to the right one, evenly spaced; y with the
 * highest rating at the top pad and the lowest at the bottom (a flat line in the middle).
 * @param {number[]} ratings  oldest first
 * @returns {Array<[number, number]>}
 */
export function chartPoints(ratings) {
  const { width, height, pad } = CHART;
  const low = Math.min(...ratings);
  const high = Math.max(...ratings);
  const step = ratings.length > 1 ? (width - 2 * pad) / (ratings.length - 1) : 0;
  return ratings.map((r, i) => {
    const y = high === low ? height / 2 : pad + ((high - r) / (high - low)) * (height - 2 * pad);
    return [Math.round((pad + i * step) * 10) / 10, Math.round(y * 10) / 10];
  });
}

/**
 * The chart of a rating history (the REST `history`, latest first), or null without one.
 * @param {string} id  the svg's id (its title's is `${id}-title`)
 * @param {Array<{before: number, after: number}>} history
 */
export function ratingChart(id, history) {
  if (!history.length) return null;
  const oldestFirst = [...history].reverse();
  const ratings = [oldestFirst[0].before, ...oldestFirst.map((r) => r.after)];
  const points = chartPoints(ratings);
  const titleId = `${id}-title`;
  const words = t("profile.ratingChart", {
    n: history.length,
    from: ratings[0],
    to: ratings[ratings.length - 1],
    low: Math.min(...ratings),
    high: Math.max(...ratings),
  });
  const last = points[points.length - 1];
  return h(
    "figure",
    { class: "rating-chart" },
    svg(
      "svg",
      {
        id,
        viewBox: `0 0 ${CHART.width} ${CHART.height}`,
        role: "img",
        "aria-labelledby": titleId,
      },
      svg("title", { id: titleId }, document.createTextNode(words)),
      svg("polyline", { points: points.map((p) => p.join(",")).join(" "), fill: "none" }),
      svg("circle", { cx: last[0], cy: last[1], r: 3 }),
    ),
  );
}
