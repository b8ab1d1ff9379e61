// The rules of TriPeaks the page needs, and the only place it reads them (docs/rules.md §1–§2):
// the layout's positions and rows, which positions cover which, the peaks, the neighbour rule
// of each rule set, and which cards are playable and removable. None of it is written here:
// engine-rules.js is made by the server from its engine (server/web/page_rules.py, from
// server/engine/layout.py and is_neighbour), so the page and the server cannot disagree. Where
// a card is drawn is not a rule: that is the table's geometry (views/table.js), worked out from
// the cover map below.
import ENGINE from "./engine-rules.js";

/** How many layout positions there are (0 … POSITIONS − 1); also the cards dealt to the layout. */
export const POSITIONS = ENGINE.positions;

/** The positions of each row, top (the three peak tops) to bottom. */
export const ROWS = ENGINE.rows.map((row) => Object.freeze([...row]));

const ROW_OF = [];
ROWS.forEach((row, i) => row.forEach((pos) => (ROW_OF[pos] = i)));

/** The row of a position: 0 = the peak tops … ROWS.length − 1 = the bottom row. */
export function rowOf(pos) {
  return ROW_OF[pos];
}

const COVERED_BY = ENGINE.covered_by.map((above) => Object.freeze([...above]));

/** The positions covering `pos`, ascending (none for the bottom row): the cover map of §1. */
export function coveredBy(pos) {
  return COVERED_BY[pos];
}

/** The score of every game before its first action (§2 "Score"). */
export const START_SCORE = ENGINE.start_score;

const PEAKS = ENGINE.peaks.map((peak) => Object.freeze([...peak]));

/** The peaks' positions (left, middle, right): a peak is cleared when all of them are empty (§1). */
export function peaks() {
  return PEAKS;
}

/** The peaks (by index: 0 left, 1 middle, 2 right) cleared in a STATE: every position empty. */
export function clearedPeaks(game) {
  return PEAKS.flatMap((peak, i) => (peak.every((pos) => game.tableau[pos] === null) ? [i] : []));
}

/** Whether `card` may go onto `waste` under `rules` ("E" or "C"): their ranks are neighbours. */
export function isNeighbour(card, waste, rules) {
  const ranks = ENGINE.neighbours[rules];
  return !!ranks && ranks[card[0]].includes(waste[0]);
}

/**
 * Whether the card at `pos` is face up in a STATE (every card covering it removed, §1). The
 * server works that out from the cover map and sends a face-down card as "down", a removed one
 * as null: the page reads it from there.
 */
export function isFaceUp(game, pos) {
  const cell = game.tableau[pos];
  return cell !== null && cell !== "down";
}

/** Whether the card at `pos` is playable (§1): still in the layout and face up, whatever its rank. */
export function isPlayable(game, pos) {
  return isFaceUp(game, pos);
}

/**
 * Whether `remove(pos)` would be accepted now (§2 "Remove"): the game is on, and the card is
 * playable and neighbours the waste card under the game's rule set.
 */
export function canRemove(game, pos) {
  return game.status === "playing" && isPlayable(game, pos) && isNeighbour(game.tableau[pos], game.waste, game.rules);
}
