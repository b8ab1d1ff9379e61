// Cards ("7S", "TH") and the TriPeaks layout (docs/rules.md §1): positions 0..27 and where they
// sit.
import { cardName } from "./i18n.js";

export const SUIT_SYMBOL = { C: "♣", D: "♦", H: "♥", S: "♠" };
const RANKS = "A23456789TJQK";

export function rankValue(card) {
  return RANKS.indexOf(card[0]) + 1;
}

export function rankText(card) {
  return card[0] === "T" ? "10" : card[0];
}

export function isRed(card) {
  return card[1] === "H" || card[1] === "D";
}

/** One rank above or below (Easy: K and A are neighbours too). */
export function isNeighbour(a, b, rules) {
  const d = Math.abs(rankValue(a) - rankValue(b));
  return d === 1 || (rules === "E" && d === 12);
}

/** Row of a position: 0 = the three peak tops … 3 = the bottom row. */
export function rowOf(pos) {
  if (pos < 3) return 0;
  if (pos < 9) return 1;
  if (pos < 18) return 2;
  return 3;
}

/**
 * Horizontal centre of a position, in card slots (the bottom row's slots are 0..9, centres at
 * 0.5 … 9.5). Each card sits centred over the two cards that cover it (docs/rules.md §1 cover
 * map), so every card half-overlaps the two below it.
 */
export function centreOf(pos) {
  const row = rowOf(pos);
  if (row === 3) return pos - 18 + 0.5;
  if (row === 2) return pos - 9 + 1; // covered by 18+j and 19+j
  if (row === 1) {
    const j = pos - 3;
    const q = Math.floor(j / 2);
    const k = j % 2;
    return 3 * q + k + 1.5; // covered by 9+3q+k and 10+3q+k
  }
  return 3 * pos + 2; // covered by 3+2p and 4+2p
}

/** The positions that cover `pos` (empty for the bottom row). */
export function coveredBy(pos) {
  const row = rowOf(pos);
  if (row === 0) return [3 + 2 * pos, 4 + 2 * pos];
  if (row === 1) {
    const j = pos - 3;
    const q = Math.floor(j / 2);
    const k = j % 2;
    return [9 + 3 * q + k, 10 + 3 * q + k];
  }
  if (row === 2) return [18 + (pos - 9), 19 + (pos - 9)];
  return [];
}

/** Fill a card element with a face (rank and suit corner, a big suit in the middle). */
export function paintFace(el, card) {
  el.classList.remove("back", "empty");
  el.classList.add("face");
  el.classList.toggle("red", isRed(card));
  el.classList.toggle("black", !isRed(card));
  el.dataset.card = card;
  const rank = rankText(card);
  const suit = SUIT_SYMBOL[card[1]];
  el.innerHTML = "";
  const corner = document.createElement("span");
  corner.className = "corner";
  corner.setAttribute("aria-hidden", "true");
  const r = document.createElement("span");
  r.className = "rank";
  r.textContent = rank;
  const s = document.createElement("span");
  s.className = "suit";
  s.textContent = suit;
  corner.append(r, s);
  const pip = document.createElement("span");
  pip.className = "pip";
  pip.setAttribute("aria-hidden", "true");
  pip.textContent = suit;
  el.append(corner, pip);
}

export function paintBack(el) {
  el.classList.remove("face", "red", "black", "empty");
  el.classList.add("back");
  delete el.dataset.card;
  el.innerHTML = "";
}

export { cardName };
