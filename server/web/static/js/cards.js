// How a card ("7S", "TH") looks: its rank and suit signs, its colour, and a card element painted
// face up or face down. Which cards neighbour which, and the layout, are rules: see rules.js.

export const SUIT_SYMBOL = { C: "♣", D: "♦", H: "♥", S: "♠" };

export function rankText(card) {
  return card[0] === "T" ? "10" : card[0];
}

export function isRed(card) {
  return card[1] === "H" || card[1] === "D";
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
