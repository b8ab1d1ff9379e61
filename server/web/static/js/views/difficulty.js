// What the page says of a daily's difficulty (docs/rules.md §4 "Difficulty"): the level its
// deal was chosen for, shown from the start, and, once the date is over, the baselines of the
// two players who see no face-down card (the greedy game, the random playouts) beside par.
import { h } from "../dom.js";
import { t } from "../i18n.js";

/** The level as a labelled badge ("Difficulty: Hard"), or null when the daily has none. */
export function levelBadge(daily, id) {
  if (!daily.difficulty) return null;
  return h(
    "span",
    { id, class: `level level-${daily.difficulty}`, dataset: { level: daily.difficulty } },
    t("daily.difficulty", { level: t(`daily.level.${daily.difficulty}`) }),
  );
}

/**
 * Par and, once the date is over, the baselines, as one line of text ("Par 764 · Greedy play:
 * blocked at 651 · Random play: 12% won, median 650"); "" when the daily has neither.
 */
export function parAndBaselines(daily) {
  const parts = [];
  if (typeof daily.par === "number") parts.push(t("home.daily.par", { par: daily.par }));
  const b = daily.baselines;
  if (b) {
    parts.push(t(`daily.greedy.${b.greedy.status}`, { score: b.greedy.score }));
    parts.push(t("daily.random", { percent: Math.round(b.random.win_rate * 100), score: b.random.median_score }));
  }
  return parts.join(" · ");
}
