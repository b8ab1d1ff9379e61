// A finished game replayed move by move (#view-replay, "/replay/<game id>"): the table at the
// current step drawn by the game table (table.js), step back and forward, play and pause, a
// slider and the list of moves to jump to one (undos shown as such), the solver's optimal line
// beside it, and the first move that left every optimal path marked. Arrow keys step. It reads
// the replay over REST and decides nothing.
import { api } from "../api.js";
import { $, clear, h } from "../dom.js";
import { cardName, formatTime, t } from "../i18n.js";
import { replayStates } from "../replay.js";
import { Table } from "./table.js";

/** Milliseconds between two steps while playing. */
const PLAY_EVERY_MS = 700;

export class ReplayView {
  /**
   * @param {HTMLElement} root  #view-replay
   * @param {object} ctx  {errorText(code)}
   */
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.table = new Table($("#replay-board", root), { remove() {}, draw() {}, undo() {} }, {
      peaks: "replay-peaks",
      stock: "replay-stock",
      "stock-count": "replay-stock-count",
      "stock-card": "replay-stock-card",
      "waste-card": "replay-waste",
      "table-moment": "replay-moment",
    });
    this.replay = null;
    this.states = [];
    this.step = 0;
    this.timer = null;
    this.error = null;
    this.loading = 0;
    $("#replay-first", root).addEventListener("click", () => this.go(0));
    $("#replay-back", root).addEventListener("click", () => this.go(this.step - 1));
    $("#replay-play", root).addEventListener("click", () => this.toggle());
    $("#replay-forward", root).addEventListener("click", () => this.go(this.step + 1));
    $("#replay-last", root).addEventListener("click", () => this.go(this.states.length - 1));
    $("#replay-slider", root).addEventListener("input", (ev) => this.go(Number(ev.target.value)));
    document.addEventListener("keydown", (ev) => this._key(ev));
  }

  /** Show the replay of a game (its id as in the address). */
  async open(gameId) {
    const ticket = ++this.loading;
    this.pause();
    this.replay = null;
    this.states = [];
    this.step = 0;
    this.error = null;
    this.render();
    try {
      const replay = await api.replay(gameId);
      if (ticket !== this.loading) return;
      this.replay = replay;
      this.states = replayStates(replay);
    } catch (err) {
      if (ticket !== this.loading) return;
      this.error = err.code || "network";
    }
    this.render();
  }

  /** Stop playing (the view is left, or the player steps by hand). */
  pause() {
    clearInterval(this.timer);
    this.timer = null;
    const play = $("#replay-play", this.root);
    play.textContent = t("replay.play");
    play.setAttribute("aria-pressed", "false");
  }

  toggle() {
    if (this.timer) {
      this.pause();
      return;
    }
    if (!this.states.length) return;
    if (this.step >= this.states.length - 1) this.go(0);
    this.timer = setInterval(() => {
      if (this.root.hidden || this.step >= this.states.length - 1) this.pause();
      else this._show(this.step + 1);
    }, PLAY_EVERY_MS);
    const play = $("#replay-play", this.root);
    play.textContent = t("replay.pause");
    play.setAttribute("aria-pressed", "true");
  }

  /** Jump to a step (0: the deal; i: after the i-th move), by hand: playing stops. */
  go(step) {
    this.pause();
    this._show(step);
  }

  _show(step) {
    if (!this.states.length) return;
    this.step = Math.max(0, Math.min(step, this.states.length - 1));
    this._renderStep();
  }

  _key(ev) {
    if (this.root.hidden || !this.states.length) return;
    if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT")) return;
    if (ev.key === "ArrowRight") this.go(this.step + 1);
    else if (ev.key === "ArrowLeft") this.go(this.step - 1);
    else if (ev.key === "Home") this.go(0);
    else if (ev.key === "End") this.go(this.states.length - 1);
    else return;
    ev.preventDefault();
  }

  /** Draw everything (after loading, or in a new language). */
  render() {
    const root = this.root;
    const replay = this.replay;
    $("#replay-error", root).textContent = this.error ? this._errorText(this.error) : "";
    $("#replay-body", root).hidden = !replay;
    $("#replay-title", root).textContent = replay ? this._title(replay) : t(this.error ? "replay.title" : "replay.loading");
    if (!replay) return;
    $("#replay-result", root).textContent = t("replay.result", {
      status: t(`replay.status.${replay.game.status}`),
      score: replay.game.score,
      moves: replay.game.moves,
      undos: replay.game.undos,
      time: replay.game.elapsed_ms === null ? "—" : formatTime(replay.game.elapsed_ms),
    });
    const slider = $("#replay-slider", root);
    slider.max = String(this.states.length - 1);
    this._moves(replay);
    this._line(replay);
    this._renderStep();
  }

  _title(replay) {
    const game = replay.game;
    if (game.mode === "daily") return t("replay.titleDaily", { name: game.player.name, date: game.daily_date });
    if (game.mode === "race") return t("replay.titleRace", { name: game.player.name, invite: game.race_invite || "" });
    return t("replay.titleFree", { name: game.player.name, code: game.code });
  }

  _errorText(code) {
    if (code === "replay_not_public") return t("replay.notPublic");
    if (code === "unknown_game" || code === "bad_game_id") return t("replay.unknown");
    return this.ctx.errorText(code);
  }

  _describe(action) {
    const card = cardName(action.card);
    if (action.action === "remove") return t("replay.move.remove", { card });
    if (action.action === "draw") return t("replay.move.draw", { card });
    return t("replay.move.undo", { card, n: action.undoes === null ? "?" : action.undoes });
  }

  _moves(replay) {
    const list = clear($("#replay-moves", this.root));
    replay.actions.forEach((action, i) => {
      const marks = [];
      if (action.undone) marks.push(h("span", { class: "replay-tag" }, t("replay.undone")));
      if (i === replay.diverged_at) marks.push(h("span", { class: "replay-tag diverged-tag" }, t("replay.diverged")));
      list.append(
        h(
          "li",
          {
            class: ["replay-move", action.action === "undo" ? "undo" : "", action.undone ? "undone" : "", i === replay.diverged_at ? "diverged" : ""]
              .filter(Boolean)
              .join(" "),
            dataset: { step: String(i + 1), action: action.action },
          },
          h(
            "button",
            { type: "button", onclick: () => this.go(i + 1) },
            h("span", { class: "replay-seq" }, `${action.seq}.`),
            " ",
            this._describe(action),
            " ",
            ...marks,
          ),
        ),
      );
    });
  }

  _line(replay) {
    const par = $("#replay-par", this.root);
    const list = clear($("#replay-line", this.root));
    if (replay.par === null || !replay.line) {
      par.textContent = t("replay.noSolver");
      $("#replay-divergence", this.root).textContent = "";
      return;
    }
    par.textContent = t("replay.par", { par: replay.par, n: replay.line.length });
    replay.line.forEach((step) => {
      list.append(h("li", {}, this._describe({ action: step.action, card: step.card })));
    });
    const note = $("#replay-divergence", this.root);
    if (replay.diverged_at === null) note.textContent = t("replay.onPath");
    else note.textContent = t("replay.divergedAt", { n: replay.actions[replay.diverged_at].seq });
  }

  _renderStep() {
    const root = this.root;
    const state = this.states[this.step];
    if (!state) return;
    this.table.render(state);
    // The cards only show the table: the arrow keys step through the moves, not between them.
    for (const button of this.table.buttons) button.tabIndex = -1;
    const total = this.states.length - 1;
    $("#replay-slider", root).value = String(this.step);
    $("#replay-step", root).textContent = t("replay.step", { n: this.step, total });
    $("#replay-score", root).textContent = String(state.score);
    $("#replay-moves-count", root).textContent = String(state.moves);
    $("#replay-back", root).disabled = this.step === 0;
    $("#replay-first", root).disabled = this.step === 0;
    $("#replay-forward", root).disabled = this.step === total;
    $("#replay-last", root).disabled = this.step === total;
    const action = this.step > 0 ? this.replay.actions[this.step - 1] : null;
    $("#replay-now", root).textContent = action ? this._describe(action) : t("replay.deal");
    const list = $("#replay-moves", root);
    for (const li of list.querySelectorAll("li")) {
      const current = Number(li.dataset.step) === this.step;
      li.classList.toggle("current", current);
      if (current) {
        li.setAttribute("aria-current", "step");
        // Keep the current move in the list's view (the list scrolls, not the page).
        const box = list.getBoundingClientRect();
        const row = li.getBoundingClientRect();
        if (row.top < box.top || row.bottom > box.bottom) list.scrollTop += row.top - box.top - box.height / 2;
      } else li.removeAttribute("aria-current");
    }
  }
}
