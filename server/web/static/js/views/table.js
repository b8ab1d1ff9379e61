// The table: the three peaks (a card button per layout position, overlapping as the cover map
// lays them out), the stock, the waste card and undo; arrow keys move between the cards. It
// only shows a STATE and reports clicks; the server decides everything. Between two STATEs
// of a game the cards move (views/motion.js): the table is drawn as the new STATE at once, and
// the move only eases the way there.
import { paintBack, paintFace } from "../cards.js";
import { cardName, t, tn } from "../i18n.js";
import { canRemove, coveredBy, peaks, POSITIONS, rowOf, ROWS } from "../rules.js";
import { changeBetween, glide, moment } from "./motion.js";

/**
 * Horizontal centre of a position, in card slots: the bottom row's cards sit side by side
 * (centres 0.5, 1.5, …), and every other card is centred over the two that cover it (the cover
 * map, rules.js), so each card half-overlaps the two below it.
 */
const CENTRES = [];
function centreOf(pos) {
  if (CENTRES[pos] === undefined) {
    const above = coveredBy(pos);
    const bottom = ROWS[ROWS.length - 1];
    CENTRES[pos] = above.length ? (centreOf(above[0]) + centreOf(above[1])) / 2 : bottom.indexOf(pos) + 0.5;
  }
  return CENTRES[pos];
}

export class Table {
  /**
   * @param {HTMLElement} root  the #board element (holds #peaks, #stock, #waste-card, …)
   * @param {object} on  {remove(pos), draw(), undo()}
   * @param {object} ids  other ids for the parts, e.g. {peaks: "replay-peaks"} (a second table
   *   on the page, such as a replay's); a part not found (no undo button) is left out
   */
  constructor(root, on, ids = {}) {
    this.root = root;
    this.on = on;
    const part = (name) => root.querySelector(`#${ids[name] || name}`);
    this.peaks = part("peaks");
    this.stock = part("stock");
    this.stockCount = part("stock-count");
    this.stockCard = part("stock-card");
    this.waste = part("waste-card");
    this.undoButton = part("btn-undo");
    this.game = null;
    this.buttons = [];
    for (let pos = 0; pos < POSITIONS; pos++) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "card";
      b.dataset.pos = String(pos);
      b.dataset.row = String(rowOf(pos));
      // Position in card slots: CSS turns these into offsets (see .peaks .card in app.css).
      b.style.setProperty("--x", String(centreOf(pos) - 0.5));
      b.style.setProperty("--row", String(rowOf(pos)));
      b.addEventListener("click", () => this.on.remove(pos));
      this.peaks.append(b);
      this.buttons.push(b);
    }
    // A glow over each peak, shown for a moment when the peak is cleared.
    this.glows = peaks().map((positions) => {
      const xs = positions.map(centreOf);
      const glow = document.createElement("div");
      glow.className = "peak-glow";
      glow.setAttribute("aria-hidden", "true");
      glow.style.setProperty("--x", String(Math.min(...xs) - 0.5));
      glow.style.setProperty("--span", String(Math.max(...xs) - Math.min(...xs) + 1));
      const label = document.createElement("span");
      label.className = "peak-glow-label";
      glow.append(label);
      this.peaks.append(glow);
      return glow;
    });
    this.moments = part("table-moment");
    this.stock.addEventListener("click", () => this.on.draw());
    if (this.undoButton) this.undoButton.addEventListener("click", () => this.on.undo());
    this.peaks.addEventListener("keydown", (ev) => this._arrows(ev));
  }

  /** Show a STATE. `highlight`: mark the playable cards (free play with "show playable" on). */
  render(game, { highlight = false } = {}) {
    const previous = this.game;
    this.game = game;
    // Where the moving card starts, taken before the new STATE is drawn.
    const change = changeBetween(previous, game);
    const start = {
      remove: () => this.buttons[change.pos],
      draw: () => this.stockCard,
      undoRemove: () => this.waste,
      undoDraw: () => this.waste,
    }[change ? change.kind : null];
    const from = start ? start().getBoundingClientRect() : null;
    const active = document.activeElement;
    const focusedPos = active && active.dataset && active.parentElement === this.peaks ? Number(active.dataset.pos) : null;
    for (let pos = 0; pos < POSITIONS; pos++) {
      const b = this.buttons[pos];
      const cell = game.tableau[pos];
      if (cell === null) {
        b.hidden = true;
        b.classList.remove("hint");
        b.removeAttribute("aria-label");
        continue;
      }
      b.hidden = false;
      if (cell === "down") {
        if (b.dataset.state !== "down") paintBack(b);
        b.dataset.state = "down";
        b.tabIndex = -1;
        b.setAttribute("aria-label", t("table.faceDown"));
        b.classList.remove("hint");
      } else {
        if (b.dataset.card !== cell) paintFace(b, cell);
        if (previous && previous.tableau[pos] === "down" && previous.game_id === game.game_id) {
          b.classList.remove("flip");
          void b.offsetWidth; // restart the turn-over animation
          b.classList.add("flip");
        }
        b.dataset.state = "up";
        b.tabIndex = 0;
        const hint = highlight && canRemove(game, pos);
        b.classList.toggle("hint", hint);
        b.setAttribute("aria-label", hint ? `${cardName(cell)}, ${t("table.playable")}` : cardName(cell));
      }
    }
    paintFace(this.waste, game.waste);
    this.waste.setAttribute("aria-label", t("table.wasteLabel", { card: cardName(game.waste) }));
    this.stockCount.textContent = String(game.stock_count);
    this.stock.classList.toggle("empty", game.stock_count === 0);
    this.stock.setAttribute(
      "aria-label",
      game.stock_count ? t("table.stockLabel", { cards: tn("count.cards", game.stock_count) }) : t("table.stockEmpty"),
    );
    this.stock.dataset.count = String(game.stock_count);
    if (this.undoButton) {
      // A ranked game (daily, race) has no undo at all (docs/rules.md §4 "Ranked play").
      this.undoButton.hidden = game.mode !== "free";
      this.undoButton.disabled = !game.can_undo;
    }
    // Keep the keyboard where it was: a removed card hands focus to the nearest card.
    if (focusedPos !== null && this.buttons[focusedPos].hidden) this._focusNear(focusedPos);
    if (change) this._move(change, from);
  }

  /** Ease the way from the STATE before to the one drawn: the card's move and any moment. */
  _move(change, from) {
    if (change.kind === "remove") glide(this.waste, from);
    else if (change.kind === "draw") glide(this.waste, from, { turn: true });
    else if (change.kind === "undoRemove") glide(this.buttons[change.pos], from);
    else if (change.kind === "undoDraw") glide(this.stockCard, from);
    const said = [];
    for (const i of change.peaks) {
      this.glows[i].firstChild.textContent = t("table.peakBonus");
      moment(this.glows[i], "shown");
      said.push(t("table.peakCleared"));
    }
    if (change.won) {
      moment(this.root, "won-moment");
      said.push(t("table.wonMoment"));
    }
    if (said.length && this.moments) this.moments.textContent = said.join(" ");
  }

  /** Point at a suggested move for a moment: the card at `pos`, or the stock for a draw. */
  suggest(action, pos, ms = 2600) {
    this.clearSuggestion();
    const el = action === "remove" ? this.buttons[pos] : action === "draw" ? this.stock : null;
    if (!el || el.hidden) return;
    el.classList.add("suggested");
    this.suggested = el;
    this.suggestTimer = setTimeout(() => this.clearSuggestion(), ms);
  }

  clearSuggestion() {
    clearTimeout(this.suggestTimer);
    if (this.suggested) this.suggested.classList.remove("suggested");
    this.suggested = null;
  }

  relabel() {
    if (this.game) this.render(this.game, { highlight: this.root.classList.contains("highlighting") });
  }

  focusFirst() {
    const first = this._focusable()[0];
    if (first) first.focus();
    else this.stock.focus();
  }

  _focusable() {
    return this.buttons.filter((b) => !b.hidden && b.dataset.state === "up");
  }

  _focusNear(pos) {
    const x = centreOf(pos);
    const row = rowOf(pos);
    const candidates = this._focusable();
    if (!candidates.length) {
      this.stock.focus();
      return;
    }
    candidates.sort((a, b) => this._distance(a, x, row) - this._distance(b, x, row));
    candidates[0].focus();
  }

  _distance(button, x, row) {
    const p = Number(button.dataset.pos);
    return Math.abs(centreOf(p) - x) + 0.6 * Math.abs(rowOf(p) - row);
  }

  _arrows(ev) {
    const dirs = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    const dir = dirs[ev.key];
    const current = ev.target;
    if (!dir || !current.dataset || current.dataset.pos === undefined) return;
    const pos = Number(current.dataset.pos);
    const x = centreOf(pos);
    const row = rowOf(pos);
    let best = null;
    let bestScore = Infinity;
    for (const b of this._focusable()) {
      if (b === current) continue;
      const p = Number(b.dataset.pos);
      const dx = centreOf(p) - x;
      const dy = rowOf(p) - row;
      const along = dir[0] ? dx * dir[0] : dy * dir[1];
      if (along <= 0) continue;
      const across = dir[0] ? Math.abs(dy) : Math.abs(dx);
      const score = along + 2 * across;
      if (score < bestScore) {
        best = b;
        bestScore = score;
      }
    }
    if (best) {
      ev.preventDefault();
      best.focus();
    } else if (dir[1] === 1) {
      ev.preventDefault();
      this.stock.focus();
    }
  }
}
