// The table view ("play"): the game's title, score, moves and running clock, the table itself
// (views/table.js), the hint, undo and give-up buttons, the keys D (draw), U (undo) and H
// (hint), and the panel of an ended game (views/end.js). It draws store.game and hands what
// the player does to the handlers of initGameView (games.js decides what happens).
import { api } from "../api.js";
import { codeText } from "../code.js";
import { $ } from "../dom.js";
import { cardName, formatTime, t, tNodes } from "../i18n.js";
import { serverNow } from "../race-clock.js";
import { store } from "../store.js";
import { initEndPanel, renderEnd } from "./end.js";
import { announce, setMessage } from "./notices.js";
import { Table } from "./table.js";

let table = null;
let on = null;

/**
 * @param {object} handlers  {act(kind, pos), hint(), resign()}, and the end panel's
 *   {startGame(message), goHome(), openLeaderboard(date)}
 */
export function initGameView(handlers) {
  on = handlers;
  initEndPanel(handlers);
  table = new Table($("#board"), {
    remove: (pos) => on.act("remove", pos),
    draw: () => on.act("draw"),
    undo: () => on.act("undo"),
  });
  $("#btn-resign").addEventListener("click", () => {
    $("#resign-confirm").hidden = false;
    $("#resign-no").focus();
  });
  $("#resign-yes").addEventListener("click", () => {
    $("#resign-confirm").hidden = true;
    on.resign();
  });
  $("#btn-hint").addEventListener("click", () => on.hint());
  $("#resign-no").addEventListener("click", () => {
    $("#resign-confirm").hidden = true;
    $("#btn-resign").focus();
  });
  document.addEventListener("keydown", onKey);
  setInterval(tick, 250);
}

/** A new STATE on the table (store "game"): a suggestion shown for the old one goes. */
export function onGame(before) {
  const game = store.game;
  if (!game || !before || before.game_id !== game.game_id || before.seq !== game.seq) table.clearSuggestion();
  renderGame(before);
}

/** Draw store.game (or, with none, the race's title); `before`: the STATE shown before. */
export function renderGame(before) {
  const game = store.game;
  const board = $("#board");
  board.hidden = !game;
  $("#view-play").classList.toggle("has-game", !!game);
  $("#view-play").classList.toggle("in-play", !!game && game.status === "playing");
  $("#stats").hidden = !game;
  if (!game) {
    $("#play-title").textContent = store.race ? t("mode.raceInvite", { invite: store.race.invite }) : "";
    return;
  }
  let title;
  if (game.mode === "daily") title = tNodes("mode.dailyOf", { date: game.daily_date });
  else if (game.mode === "race") title = tNodes("mode.raceInvite", { invite: store.race ? store.race.invite : "" });
  else title = tNodes("mode.freeCode", { code: game.code ? codeText(game.code) : "" });
  title.push(` · ${t(`rules.short.${game.rules}`)}`);
  const head = $("#play-title");
  const text = title.map((x) => (typeof x === "string" ? x : x.textContent)).join("");
  if (head.textContent !== text) head.replaceChildren(...title);
  $("#stat-score").textContent = String(game.score);
  $("#stat-moves").textContent = String(game.moves);
  tick();
  // Never highlight playable cards in ranked (daily) or race games.
  const highlight = store.showPlayable && game.mode === "free";
  board.classList.toggle("highlighting", highlight);
  table.render(game, { highlight });
  const canResign = game.status === "playing" || (game.status === "blocked" && game.mode === "free");
  $("#btn-resign").hidden = !canResign;
  // Hints: free play only, while there is a move to make.
  $("#btn-hint").hidden = !(game.mode === "free" && game.status === "playing");
  $("#hint-note").hidden = !(game.mode === "free" && store.hinted.has(game.game_id));
  if (!canResign) $("#resign-confirm").hidden = true;
  renderEnd(game, before);
}

/** Put the keyboard on the first face-up card (or the stock). */
export function focusTable() {
  table.focusFirst();
}

/** Point at the server's suggested move for a moment, and say it. */
export function showHint(action, pos) {
  $("#hint-note").hidden = false;
  let text;
  if (action === "remove" && pos !== null && pos !== undefined) {
    text = t("hint.remove", { card: cardName(store.game.tableau[pos]) });
  } else if (action === "draw") {
    text = t("hint.draw");
  } else {
    text = t("hint.none");
  }
  table.suggest(action, pos);
  setMessage(text);
  announce(text);
}

/** A resumed free game may have had hints before: its summary says so (asked once per game). */
export async function checkHinted(game) {
  if (store.checkedHinted.has(game.game_id) || game.moves === 0) return;
  store.checkedHinted.add(game.game_id);
  try {
    const summary = await api.game(game.game_id, store.token);
    if (summary.hinted) {
      store.hinted.add(game.game_id);
      if (store.game && store.game.game_id === game.game_id) renderGame(store.game);
    }
  } catch (err) {
    /* not known: no mark */
  }
}

/**
 * The game's clock, as the server counts it (docs/rules.md §2 "Elapsed time"): in a race, server
 * time since the race's start; otherwise the STATE's elapsed_ms, run on since the STATE came
 * while the game is on (the server counts time away from the table too, and a resumed game's
 * STATE brings its count), and stopped at the server's count once the game has ended.
 */
function tick() {
  const game = store.game;
  if (!game || store.view !== "play") return;
  let ms = game.elapsed_ms;
  if (game.status === "playing") {
    if (game.mode === "race" && store.race && store.race.room.starts_at) {
      const room = store.race.room;
      const now = room.ends_at ? Math.min(serverNow(store.race), Date.parse(room.ends_at)) : serverNow(store.race);
      ms = Math.max(0, now - Date.parse(room.starts_at));
    } else {
      ms = game.elapsed_ms + (performance.now() - store.gameAt);
    }
  }
  const text = formatTime(ms);
  const el = $("#stat-time");
  if (el.textContent !== text) el.textContent = text;
}

/** The table's keys: D draws, U undoes, H asks for a hint (not while typing in a field). */
function onKey(ev) {
  if (store.view !== "play" || !store.game) return;
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return; // a held key plays once
  const target = ev.target;
  if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) return;
  const key = ev.key.toLowerCase();
  if (key === "d") {
    ev.preventDefault();
    on.act("draw");
  } else if (key === "u") {
    ev.preventDefault();
    on.act("undo");
  } else if (key === "h") {
    ev.preventDefault();
    on.hint();
  }
}
