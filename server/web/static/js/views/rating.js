// How a rating and its change read (docs/rules.md §4 "Ratings"): the rating shown with "?" while
// provisional, a change signed (+12, −8, ±0); shared by the race results, the ladder and the
// profile.
import { h } from "../dom.js";
import { t } from "../i18n.js";

/** A shown rating, with "?" while provisional: "1512", "87?". */
export function ratingText(rating, provisional) {
  return `${rating}${provisional ? "?" : ""}`;
}

/** A signed change: "+12", "−8" (a minus sign), "±0". */
export function changeText(change) {
  if (change > 0) return `+${change}`;
  if (change < 0) return `\u2212${-change}`;
  return "\u00b10";
}

/**
 * A rating change as a small mark: its sign and, while provisional, "?"; its title (and the
 * screen reader's text) says the rating before and after.
 * @param {{before: number, after: number, change: number, provisional: boolean}} rating
 */
export function changeMark(rating) {
  const words = t(rating.provisional ? "rating.changeProvisional" : "rating.change", {
    before: rating.before,
    after: rating.after,
  });
  const trend = rating.change > 0 ? "up" : rating.change < 0 ? "down" : "same";
  return h(
    "small",
    { class: `rating-change ${trend}`, title: words },
    h("span", { "aria-hidden": "true" }, `${changeText(rating.change)}${rating.provisional ? "?" : ""}`),
    h("span", { class: "sr-only" }, words),
  );
}
